// Package pullcache says where qwenc pull and qwenrun's oci:// models
// land, the directory given to format/oci's Cache, and pulls them there.
// It reads the environment for it, which the library packages never do.
package pullcache
