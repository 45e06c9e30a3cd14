package ovsdbnb

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// NextCfg increments NB_Global's nb_cfg, the sequence number chassis
// report back once they have applied the database up to it (what
// `ovn-nbctl --wait=hv` waits on), and returns the new value: wait for
// the chassis that matter on the Southbound (internal/sbwait).
func (c *Client) NextCfg(ctx context.Context) (int, error) {
	// The one NB_Global row; an empty where would be left out of the
	// request, which the server refuses.
	all := []ovsdb.Condition{ovsdb.NewCondition("nb_cfg", ovsdb.ConditionGreaterThanOrEqual, 0)}
	ops := []ovsdb.Operation{
		{Op: ovsdb.OperationMutate, Table: nbdb.NBGlobalTable, Where: all,
			Mutations: []ovsdb.Mutation{{Column: "nb_cfg", Mutator: ovsdb.MutateOperationAdd, Value: 1}}},
		{Op: ovsdb.OperationSelect, Table: nbdb.NBGlobalTable, Where: all, Columns: []string{"nb_cfg"}},
	}
	res, err := c.transact(ctx, ops...)
	if err == nil {
		if _, err = ovsdb.CheckOperationResults(res, ops); err != nil {
			err = fmt.Errorf("%w: %+v", err, res)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("ovsdbnb: nb_cfg: %w", err)
	}
	if len(res) < 2 || len(res[1].Rows) != 1 {
		return 0, errors.New("ovsdbnb: nb_cfg: no NB_Global row")
	}
	switch v := res[1].Rows[0]["nb_cfg"].(type) {
	case float64:
		return int(v), nil
	case int:
		return v, nil
	default:
		return 0, fmt.Errorf("ovsdbnb: nb_cfg: unexpected %T", v)
	}
}
