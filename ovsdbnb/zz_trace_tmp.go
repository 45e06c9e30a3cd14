package ovsdbnb

import (
	"fmt"
	"os"
	"time"
)

var traceOn = os.Getenv("OVNEDGE_TRACE") != ""

// Tr is a temporary timeline print.
func Tr(format string, a ...any) {
	if traceOn {
		fmt.Fprintf(os.Stderr, "TR %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000000")}, a...)...)
	}
}
