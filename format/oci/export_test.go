package oci

import "time"

// FastRetries has the tests' retries wait a millisecond, not seconds.
func FastRetries() (restore func()) {
	saved := retryBackoff
	retryBackoff.Duration = time.Millisecond
	return func() { retryBackoff = saved }
}

// ProgressFrom has downloads of min bytes or more tell their progress.
func ProgressFrom(min int64) (restore func()) {
	saved := progressMin
	progressMin = min
	return func() { progressMin = saved }
}
