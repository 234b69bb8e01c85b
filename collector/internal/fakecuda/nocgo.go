//go:build !cgo

// Package fakecuda builds and drives a fake CUDA library; without cgo it
// cannot load it, and tests that need it skip.
package fakecuda

import "errors"

// Build fails: the fake library cannot be loaded without cgo.
func Build(string) (string, error) { return "", errors.New("fakecuda needs cgo") }

// Lib is unavailable without cgo.
type Lib struct{}

// Open fails without cgo.
func Open(string) (*Lib, error) { return nil, errors.New("fakecuda needs cgo") }
