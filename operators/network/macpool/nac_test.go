package macpool_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/converge-dev/converge/operators/network/macpool"
)

// TestNetworkAddonsConfigRange: the range comes from the
// NetworkAddonsConfig's spec.kubeMacPool; none (or no object) gives the
// zero Range, half a range or a bad MAC an error naming the field.
func TestNetworkAddonsConfigRange(t *testing.T) {
	nac := func(pool map[string]any) client.Object {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetGroupVersionKind(macpool.NetworkAddonsConfigGVK)
		u.SetName(macpool.NetworkAddonsConfigName)
		if pool != nil {
			_ = unstructured.SetNestedMap(u.Object, pool, "spec", "kubeMacPool")
		}
		return u
	}
	for _, c := range []struct {
		name    string
		objs    []client.Object
		want    string // Range.String(), "" for zero
		wantErr string
	}{
		{name: "no NetworkAddonsConfig"},
		{name: "empty kubeMacPool", objs: []client.Object{nac(map[string]any{})}},
		{name: "no kubeMacPool", objs: []client.Object{nac(nil)}},
		{name: "range", objs: []client.Object{nac(map[string]any{"rangeStart": "02:00:00:00:00:00", "rangeEnd": "02:00:00:00:FF:FF"})},
			want: "02:00:00:00:00:00–02:00:00:00:ff:ff"},
		{name: "half a range", objs: []client.Object{nac(map[string]any{"rangeStart": "02:00:00:00:00:00"})},
			wantErr: `NetworkAddonsConfig cluster: spec.kubeMacPool: rangeStart "02:00:00:00:00:00" and rangeEnd "": want both or neither`},
		{name: "bad MAC", objs: []client.Object{nac(map[string]any{"rangeStart": "02:00:00:00:00:00", "rangeEnd": "zz"})},
			wantErr: "NetworkAddonsConfig cluster: spec.kubeMacPool: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithObjects(c.objs...).Build()
			got, err := macpool.NetworkAddonsConfigRange(r)(context.Background())
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case c.want == "" && !got.IsZero():
				t.Fatalf("range %s, want zero", got)
			case c.want != "" && got.String() != c.want:
				t.Fatalf("range %s, want %s", got, c.want)
			}
		})
	}
}
