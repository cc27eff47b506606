package hcowebhook

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/webhook"
)

// Lifetimes reads the certificate lifetimes of a rendered v1 HyperConverged
// (spec.security.certConfig.{ca,server}.{duration,renewBefore}, Go duration
// strings) so that the hco-webhook's own certificate follows the HC's
// certConfig, as HCO's operands' certificates do. Absent values keep the
// HCO defaults (webhook.DefaultLifetimes); an unparsable or
// inconsistent value is an error naming the field.
func Lifetimes(hc *unstructured.Unstructured) (webhook.Lifetimes, error) {
	l := webhook.DefaultLifetimes()
	fields := []struct {
		path []string
		dst  *time.Duration
	}{
		{[]string{"ca", "duration"}, &l.CADuration},
		{[]string{"ca", "renewBefore"}, &l.CARenewBefore},
		{[]string{"server", "duration"}, &l.ServerDuration},
		{[]string{"server", "renewBefore"}, &l.ServerRenewBefore},
	}
	for _, f := range fields {
		path := append([]string{"spec", "security", "certConfig"}, f.path...)
		s, ok, err := unstructured.NestedString(hc.Object, path...)
		if err != nil {
			return l, fmt.Errorf("HyperConverged %s/%s: %w", hc.GetNamespace(), hc.GetName(), err)
		}
		if !ok {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return l, fmt.Errorf("HyperConverged %s/%s: spec.security.certConfig.%s.%s: %w", hc.GetNamespace(), hc.GetName(), f.path[0], f.path[1], err)
		}
		*f.dst = d
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("HyperConverged %s/%s: spec.security.certConfig: %w", hc.GetNamespace(), hc.GetName(), err)
	}
	return l, nil
}
