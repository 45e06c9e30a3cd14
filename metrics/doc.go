// Package metrics holds an ovnedge instance's Prometheus metrics (reconcile
// latency, failovers, audits, and the counters of the ARP responder, the
// BGP speaker, the flow appliers and the NB writer, read when scraped) and
// serves them with its health: /metrics, /healthz, /readyz and, when
// asked, /debug/pprof/.
//
//	m := metrics.New()
//	m.SetNBStats(writer.Stats)
//	m.SetReadiness(false, "InformersNotSynced")
//	go http.ListenAndServe(":9476", m.Handler(false))
package metrics
