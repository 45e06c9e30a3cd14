package arp

import (
	"log/slog"
	"testing"
	"time"
)

var quietLog = slog.New(slog.DiscardHandler)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    Config // timing fields only
		wantErr bool
	}{
		{"defaults: every 1.1 s for 5 s", Config{Interface: "br-ex"}, Config{Interval: 1100 * time.Millisecond, Duration: 5 * time.Second, Poll: DefaultPoll}, false},
		{"configured", Config{Interface: "br-ex", Interval: time.Second, Duration: 3 * time.Second, Poll: time.Second}, Config{Interval: time.Second, Duration: 3 * time.Second, Poll: time.Second}, false},
		{"empty interface", Config{}, Config{}, true},
		{"negative interval", Config{Interface: "br-ex", Interval: -time.Second}, Config{}, true},
		{"negative duration", Config{Interface: "br-ex", Duration: -time.Second}, Config{}, true},
		{"negative poll", Config{Interface: "br-ex", Poll: -time.Second}, Config{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quietLog
			r, err := New(tc.cfg)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (Config{Interval: r.cfg.Interval, Duration: r.cfg.Duration, Poll: r.cfg.Poll}); got != tc.want {
				t.Errorf("timing %+v, want %+v", got, tc.want)
			}
		})
	}
}
