// Package fsutil writes files so that a reader never sees a part of one,
// and says what is wrong with a file in the words of the name the user
// gave.
package fsutil
