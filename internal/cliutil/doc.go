// Package cliutil holds what both commands need from the command line.
package cliutil
