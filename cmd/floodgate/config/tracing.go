package config

// Tracing configures OpenTelemetry tracing: a span per decision on every
// door, exported over OTLP/HTTP. The exporter reads the standard
// variables (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, default http://localhost:4318;
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, ...), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; trace context comes in
// W3C traceparent and tracestate headers. Read at start: a reload does
// not change it.
type Tracing struct {
	// Enabled turns tracing on; default off, which costs nothing.
	Enabled bool `yaml:"enabled"`
	// SampleRatio samples that share (0..1) of the traces that start at
	// Floodgate, following a caller's sampled flag otherwise (parent
	// based). Unset: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
	// else every trace.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// tracing checks sample_ratio whether tracing is on or not, so that a
// file that turns it on later does not fail only at start.
func (v *validator) tracing() {
	if r := v.cfg.Tracing.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) { // NaN too
		v.fail("tracing.sample_ratio", "want a share from 0 to 1, got %v", *r)
	}
}
