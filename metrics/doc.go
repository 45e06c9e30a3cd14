// Package metrics holds an ovnedge instance's Prometheus metrics (reconcile
// latency, failovers, audits, and the counters of the ARP responder, the
// BGP speaker, the flow appliers and the NB writer, read when scraped) and
// serves them with its health: /metrics, /healthz, /readyz and, when
// asked, /debug/pprof/.
//
//	m := metrics.New()
//	m.SetNBStats(writer.Stats)
//	m.SetReadiness(false, "InformersNotSynced")
//	go http.ListenAndServe("127.0.0.1:9476", m.Handler(false))
//
// On a host network Serve splits them: /metrics over HTTPS for the bearer
// tokens the API server authenticates and authorizes (KubeAuth:
// TokenReview and SubjectAccessReview, cached and retried as
// k8s.io/apiserver's delegating authenticator and authorizer do, on
// client-go's typed clients: see KubeAuth's deviation), /healthz and /readyz
// alone over plain HTTP for the kubelet's probes, /debug/pprof/ on a
// loopback address only.
//
//	auth, _ := metrics.NewKubeAuth(clientset, log)
//	tlsConf, _ := metrics.TLSConfig("", "", nodeName, log) // self-signed
//	stop, err := m.Serve(metrics.ServeOptions{MetricsAddr: ":9476", Auth: auth, TLS: tlsConf,
//		HealthAddr: ":9475", Log: log})
package metrics
