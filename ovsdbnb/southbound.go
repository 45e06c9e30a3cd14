package ovsdbnb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
)

// DialSouthbound connects to the OVN Southbound at endpoints (unix:, tcp:,
// ssl: with tlsConfig), reconnecting with backoff once connected, and
// monitors the tables of models (table name -> model, each with every
// column of the table: the cache drops an update naming a column its
// model lacks). The readers of the Southbound (sbwait's chassis, the
// unidling's controller events) each need a table or two.
func DialSouthbound(ctx context.Context, endpoints []string, tlsConfig *tls.Config, models map[string]model.Model) (client.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("southbound: no endpoints")
	}
	m, err := model.NewClientDBModel("OVN_Southbound", models)
	if err != nil {
		return nil, fmt.Errorf("southbound: model: %w", err)
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, 5*time.Second, 0
	opts := []client.Option{client.WithReconnect(5*time.Second, bo)}
	for _, ep := range endpoints {
		opts = append(opts, client.WithEndpoint(ep))
	}
	if tlsConfig != nil {
		opts = append(opts, client.WithTLSConfig(tlsConfig))
	}
	sb, err := client.NewOVSDBClient(m, opts...)
	if err != nil {
		return nil, fmt.Errorf("southbound: %w", err)
	}
	if err := sb.Connect(ctx); err != nil {
		return nil, fmt.Errorf("southbound: connect %s: %w", strings.Join(endpoints, ","), err)
	}
	if _, err := sb.MonitorAll(ctx); err != nil {
		sb.Close()
		return nil, fmt.Errorf("southbound: monitor: %w", err)
	}
	return sb, nil
}
