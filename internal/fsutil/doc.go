// Package fsutil writes files so that a reader never sees a part of one,
// says what is wrong with a file in the words of the name the user gave,
// locks a file to one process, and tells a filesystem's free space.
package fsutil
