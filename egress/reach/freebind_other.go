//go:build !linux

package reach

import "syscall"

// freebind is Linux's IP_FREEBIND; elsewhere the address must exist
// before the server binds it.
func freebind(string, string, syscall.RawConn) error { return nil }
