package measure

import (
	"fmt"
	"io"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Background lists the resources of apiserver_request_total that
// kube-apiserver's own loops and every controller's leases touch whatever
// the workload (lease renewals, endpoint reconcilers); Requests leaves
// them out.
var Background = []string{"leases", "endpoints", "endpointslices"}

// Requests sums apiserver_request_total in the Prometheus text exposition
// read from r (kube-apiserver's /metrics) over every series whose resource
// label is not in Background. It fails when the text does not parse or has
// no apiserver_request_total counter.
func Requests(r io.Reader) (float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	f := families["apiserver_request_total"]
	if f == nil {
		return 0, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	var n float64
	for _, m := range f.GetMetric() {
		if m.GetCounter() == nil {
			return 0, fmt.Errorf("apiserver_request_total is a %s, want a counter", f.GetType())
		}
		background := false
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource" && slices.Contains(Background, l.GetValue()) {
				background = true
			}
		}
		if !background {
			n += m.GetCounter().GetValue()
		}
	}
	return n, nil
}
