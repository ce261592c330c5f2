//go:build tools

// Package suite pins go-fuse's posixtest, the independent POSIX conformance suite that
// crates/byzfs/tests/posix.rs builds (`go test -c github.com/hanwen/go-fuse/v2/posixtest`)
// and runs over a mounted ByzFS. This file only makes `go mod tidy` keep the dependency.
package suite

import _ "github.com/hanwen/go-fuse/v2/posixtest"
