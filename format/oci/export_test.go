package oci

import "time"

// FastRetries has the tests' retries wait a millisecond, not seconds.
func FastRetries() (restore func()) {
	saved := retryBackoff
	retryBackoff.Duration = time.Millisecond
	return func() { retryBackoff = saved }
}
