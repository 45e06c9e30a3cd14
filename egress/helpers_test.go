package egress_test

import (
	"encoding/json"
)

// equalJSON compares two values by their JSON form (netip types compare by
// text, nil and empty slices alike are distinguished as JSON does).
func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
