package header_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/floodgate/floodgate/header"
)

func ExampleFormatPolicy() {
	s, err := header.FormatPolicy([]header.Policy{
		{Name: "minute", Quota: 60, Window: 60},
		{Name: "upload", Quota: 1048576, Unit: header.UnitContentBytes, Window: 3600, PartitionKey: []byte("user:42")},
	})
	fmt.Println(s, err)
	// Output: "minute";q=60;w=60, "upload";q=1048576;qu="content-bytes";w=3600;pk=:dXNlcjo0Mg==: <nil>
}

func ExampleFormatLimit() {
	s, _ := header.FormatLimit([]header.Limit{{Name: "minute", Remaining: 0, Window: 41, HasWindow: true}})
	fmt.Println("RateLimit:", s)
	fmt.Println("Retry-After:", header.FormatRetryAfter(40200*time.Millisecond))
	// Output:
	// RateLimit: "minute";r=0;t=41
	// Retry-After: 41
}

func ExampleParseLimit() {
	// Two field lines are one List.
	ls, err := header.ParseLimit(`"min";r=10;t=20`, `"day";r=900;t=40000`)
	for _, l := range ls {
		fmt.Println(l.Name, l.Remaining, l.Window)
	}
	// Any violation invalidates the whole field.
	_, err2 := header.ParseLimit(`"a";r=5, "b";r=-1`)
	fmt.Println(err, err2 != nil)
	// Output:
	// min 10 20
	// day 900 40000
	// <nil> true
}

func ExampleParsePolicyLenient() {
	if _, err := header.ParsePolicy(`default;q=100;w=60`); err != nil {
		fmt.Println("strict:", err)
	}
	ps, _ := header.ParsePolicyLenient(`default;q=100;w=60`)
	fmt.Printf("lenient: %s q=%d lenient=%v\n", ps[0].Name, ps[0].Quota, ps[0].Lenient)
	// Output:
	// strict: header: invalid field value: member 0: name must be String, got Token
	// lenient: default q=100 lenient=true
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 3, 13, 9, 29, 0, 0, time.UTC)
	d1, _ := header.ParseRetryAfter("120", now)
	d2, _ := header.ParseRetryAfter("Fri, 13 Mar 2026 09:30:00 GMT", now)
	_, err := header.ParseRetryAfter("fri, 13 Mar 2026 09:30:00 GMT", now)
	d3, _ := header.ParseRetryAfterLenient("fri, 13 Mar 2026 09:30:00 GMT", now)
	fmt.Println(d1, d2, err != nil, d3)
	// Output: 2m0s 1m0s true 1m0s
}

func ExampleDetect() {
	h := http.Header{}
	h.Set("RateLimit", "limit=100, remaining=50, reset=5") // express-rate-limit draft-7
	h.Set("Retry-After", "5")
	o := header.Detect(h, time.Now(), header.DetectOptions{})
	fmt.Println(o.Dialect, o.Limit, o.Remaining, o.Reset.Seconds, o.RetryAfter.Seconds)
	// Output: draft-07 100 50 5 5
}

func ExampleSetLegacy() {
	now := time.Unix(1773394140, 0)
	h := http.Header{}
	header.SetLegacy(h, 60, 12, now.Add(37*time.Second), now, header.ResetEpoch)
	fmt.Println(h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"))
	// Output: 60 12 1773394177
}
