package metrics

// Declare creates rule's series at zero before its first decision, so
// that dashboards and alerts (rate(), absent()) see every configured rule
// from the start: floodgate_decisions_total with outcome allowed (policy
// "") and denied for each of policies, floodgate_store_duration_seconds,
// floodgate_near_cache_duration_seconds,
// floodgate_store_errors_total, floodgate_retry_after_seconds and
// floodgate_bypasses_total for the reasons "token" and "cidr". Series of
// other outcomes (a block, a reduction) still appear at their first event.
func (m *Metrics) Declare(rule string, policies []string) {
	m.decisions.WithLabelValues(rule, "", "allowed")
	for _, p := range policies {
		m.decisions.WithLabelValues(rule, p, "denied")
	}
	m.latency.WithLabelValues(rule)
	m.cached.WithLabelValues(rule)
	m.storeErrors.WithLabelValues(rule)
	m.retry.WithLabelValues(rule)
	m.bypasses.WithLabelValues(rule, "token")
	m.bypasses.WithLabelValues(rule, "cidr")
}
