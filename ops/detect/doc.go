// Package detect finds abuse in rate-limit decisions and blocks it
// (REQUIREMENTS O3; draft-11 §5's abnormal-usage-detected): a Detector is
// an engine.Observer counting each key's refusals per rule (by default 100
// within a minute is an alert) and an engine.Blocker refusing a key for a
// while after its alert, with one error-level log record, a counter and
// an optional webhook per alert.
//
//	det, err := detect.NewDetector(detect.DetectorConfig{Default: detect.AbuseRule{Block: 5 * time.Minute}})
//	eng, err := engine.New(engine.Config{Store: store, Observer: det, Blocker: det})
package detect
