package clientip_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/floodgate/floodgate/clientip"
)

func Example() {
	res, err := clientip.New(clientip.Config{
		TrustedProxies: []string{"10.0.0.0/8"},
		Sources:        []clientip.Source{clientip.XForwardedFor},
		GroupIPv6:      true,
	})
	if err != nil {
		panic(err)
	}

	// Behind the trusted load balancer 10.0.0.5: the header is believed.
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.5:41000"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 2001:db8:1:2::beef, 10.0.0.7")
	fmt.Println(res.ClientIP(req))
	fmt.Println(res.Key(req))

	// Straight from the internet: the same header is ignored.
	req.RemoteAddr = "198.51.100.9:5000"
	fmt.Println(res.Key(req))
	// Output:
	// 2001:db8:1:2::beef <nil>
	// 2001:db8:1:2::/64
	// 198.51.100.9
}
