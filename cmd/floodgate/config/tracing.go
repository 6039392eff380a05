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
