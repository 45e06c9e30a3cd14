package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// NB timeouts: connecting and monitoring, one transaction, and waiting
// for ovn-controller to bind the port.
const (
	nbConnectTimeout  = 5 * time.Second
	nbTransactTimeout = 10 * time.Second
	upTimeout         = 30 * time.Second
	upPoll            = 100 * time.Millisecond
)

// newLSPUUID is the named UUID of a port created in a transaction.
const newLSPUUID = "new_lsp"

// dialNB connects to the NB and monitors only the switch sw (its name
// and ports) and the port lsp, so the plugin's cache stays tiny however
// big the cluster.
func dialNB(conf *netConf, sw, lsp string) (client.Client, error) {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("ovncni: NB model: %w", err)
	}
	quiet := logr.Discard() // stdout is the CNI result; nothing else is said
	opts := []client.Option{client.WithLogger(&quiet)}
	for _, ep := range nbEndpoints(conf.NBAddress) {
		opts = append(opts, client.WithEndpoint(ep))
	}
	c, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return nil, fmt.Errorf("ovncni: NB client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nbConnectTimeout)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("ovncni: connect to NB %s: %w", conf.NBAddress, err)
	}
	ls, port := &nbdb.LogicalSwitch{}, &nbdb.LogicalSwitchPort{}
	m := c.NewMonitor(
		client.WithConditionalTable(ls, []model.Condition{{Field: &ls.Name, Function: ovsdb.ConditionEqual, Value: sw}},
			&ls.Name, &ls.Ports),
		client.WithConditionalTable(port, []model.Condition{{Field: &port.Name, Function: ovsdb.ConditionEqual, Value: lsp}}),
	)
	if _, err := c.Monitor(ctx, m); err != nil {
		c.Close()
		return nil, fmt.Errorf("ovncni: monitor NB %s: %w", conf.NBAddress, err)
	}
	return c, nil
}

// findSwitch returns the cached switch called name, or nil.
func findSwitch(c client.Client, name string) (*nbdb.LogicalSwitch, error) {
	var found []nbdb.LogicalSwitch
	err := c.WhereCache(func(ls *nbdb.LogicalSwitch) bool { return ls.Name == name }).List(context.Background(), &found)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return &found[0], nil
}

// findLSP returns the cached port called name, or nil.
func findLSP(c client.Client, name string) (*nbdb.LogicalSwitchPort, error) {
	lsp := &nbdb.LogicalSwitchPort{Name: name}
	switch err := c.Get(context.Background(), lsp); {
	case errors.Is(err, client.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return lsp, nil
}

// bindLSP creates (or updates) the pod's logical switch port with
// addresses "<MAC> <IPs>" on the configured switch and waits until
// ovn-controller has bound it.
func bindLSP(conf *netConf, name, namespace, addresses string) error {
	c, err := dialNB(conf, conf.LogicalSwitch, name)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ensureLSP(c, conf.LogicalSwitch, name, namespace, addresses); err != nil {
		return err
	}
	return waitUp(c, name)
}

// ensureLSP writes the port and its place in the switch's ports in one
// transaction, as OVN-Kubernetes' pod handler does: created when new,
// its addresses, port security and external IDs updated when it exists.
func ensureLSP(c client.Client, sw, name, namespace, addresses string) error {
	ls, err := findSwitch(c, sw)
	if err != nil {
		return fmt.Errorf("ovncni: NB: look up switch %s: %w", sw, err)
	}
	if ls == nil {
		return fmt.Errorf("ovncni: NB: no logical switch %q (logicalSwitch in the network config)", sw)
	}
	old, err := findLSP(c, name)
	if err != nil {
		return fmt.Errorf("ovncni: NB: look up port %s: %w", name, err)
	}
	lsp := &nbdb.LogicalSwitchPort{Name: name, Addresses: []string{addresses}, PortSecurity: []string{addresses},
		ExternalIDs: map[string]string{"pod": "true"}}
	if namespace != "" {
		lsp.ExternalIDs["namespace"] = namespace
	}
	var ops []ovsdb.Operation
	if old == nil {
		lsp.UUID = newLSPUUID
		ops, err = c.Create(lsp)
	} else {
		lsp.UUID = old.UUID
		ops, err = c.Where(lsp).Update(lsp, &lsp.Addresses, &lsp.PortSecurity, &lsp.ExternalIDs)
	}
	if err != nil {
		return fmt.Errorf("ovncni: NB: port %s: %w", name, err)
	}
	add, err := c.Where(ls).Mutate(ls, model.Mutation{Field: &ls.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{lsp.UUID}})
	if err != nil {
		return fmt.Errorf("ovncni: NB: add port %s to %s: %w", name, sw, err)
	}
	res, err := transact(c, fmt.Sprintf("write port %s on %s", name, sw), append(ops, add...)...)
	if err == nil && res[len(res)-1].Count == 0 {
		err = fmt.Errorf("ovncni: NB: switch %s went away while adding port %s", sw, name)
	}
	return err
}

// transact runs ops in one transaction and checks every result; what
// names the transaction in errors.
func transact(c client.Client, what string, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nbTransactTimeout)
	defer cancel()
	res, err := c.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, ops)
	}
	if err != nil {
		return nil, fmt.Errorf("ovncni: NB: %s: %w", what, err)
	}
	return res, nil
}

// waitUp polls the cached port until its up column is true (northd sets
// it once ovn-controller has bound the port and installed its flows),
// as OVN-Kubernetes waits for ovn-installed, for up to upTimeout.
func waitUp(c client.Client, name string) error {
	deadline := time.Now().Add(upTimeout)
	for {
		lsp, err := findLSP(c, name)
		if err == nil && lsp != nil && lsp.Up != nil && *lsp.Up {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ovncni: port %s not up after %v (is ovn-controller running on this chassis?)", name, upTimeout)
		}
		time.Sleep(upPoll)
	}
}

// deleteLSP removes the port called name and its reference from the
// configured switch, if they are there.
func deleteLSP(conf *netConf, name string) error {
	c, err := dialNB(conf, conf.LogicalSwitch, name)
	if err != nil {
		return err
	}
	defer c.Close()
	lsp, err := findLSP(c, name)
	if err != nil {
		return fmt.Errorf("ovncni: NB: look up port %s: %w", name, err)
	}
	if lsp == nil {
		return nil
	}
	var ops []ovsdb.Operation
	ls, err := findSwitch(c, conf.LogicalSwitch)
	if err == nil && ls != nil {
		ops, err = c.Where(ls).Mutate(ls, model.Mutation{Field: &ls.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{lsp.UUID}})
	}
	if err != nil {
		return fmt.Errorf("ovncni: NB: remove port %s from %s: %w", name, conf.LogicalSwitch, err)
	}
	del, err := c.Where(lsp).Delete()
	if err != nil {
		return fmt.Errorf("ovncni: NB: delete port %s: %w", name, err)
	}
	_, err = transact(c, "delete port "+name, append(ops, del...)...)
	return err
}
