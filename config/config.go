// Package config holds what a plugin's configuration needs without the
// host: the error a Validate method returns to name the field at fault.
// Backends served as executables of their own import it instead of the
// host, so that they link neither the deployment loader nor its YAML and
// schema libraries.
package config

import "fmt"

// FieldError is what a config's Validate method returns to name the field
// at fault; the host's loader then reports the line where that field is
// set. Field is the key path in the document, dot-separated for nested
// structs ("sandbox.mode").
type FieldError struct {
	Field string
	Err   error
}

// FieldErrorf builds a FieldError with a formatted message. The message
// says what is wrong with the field; the loader adds the file, line, entry
// and plugin, so the message does not repeat them.
func FieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }
