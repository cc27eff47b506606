package receiver

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// fluxPath is Flux's formula as notification-controller writes it
// (api/v1 Receiver.GetWebhookPath), the oracle of TestPath.
func fluxPath(token, name, namespace string) string {
	return fmt.Sprintf("%s%x", "/hook/", sha256.Sum256([]byte(token+name+namespace)))
}

func TestPath(t *testing.T) {
	tests := []struct {
		name  string
		key   types.NamespacedName
		token string
		want  string // "" checks against fluxPath only
	}{
		// printf 's3cret-tokenmainhooks' | sha256sum
		{"fixed vector", types.NamespacedName{Namespace: "hooks", Name: "main"}, "s3cret-token",
			"/hook/b0d25177b92d3f935a11656aee34bb92933e3dccf3d8506c8c84b68d9a3ce069"},
		{"dotted name", types.NamespacedName{Namespace: "ns", Name: "a.b"}, "t", ""},
		{"token with a newline", types.NamespacedName{Namespace: "ns", Name: "a"}, "t\n", ""},
		{"binary token", types.NamespacedName{Namespace: "ns", Name: "a"}, "\x00\xff", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Path(tt.key, []byte(tt.token))
			if flux := fluxPath(tt.token, tt.key.Name, tt.key.Namespace); got != flux {
				t.Errorf("Path = %q, Flux's formula gives %q", got, flux)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("Path = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, tt.key.Name) && len(tt.key.Name) > 2 || strings.Contains(got, tt.key.Namespace) && len(tt.key.Namespace) > 2 {
				t.Errorf("Path %q names the Sync", got)
			}
		})
	}
	if a, b := Path(types.NamespacedName{Namespace: "ns", Name: "a"}, []byte("t1")), Path(types.NamespacedName{Namespace: "ns", Name: "a"}, []byte("t2")); a == b {
		t.Errorf("two tokens give one path %s", a)
	}
}

// TestIndex runs a sequence of Set and Delete calls and checks, after
// each, what every path seen so far leads to.
func TestIndex(t *testing.T) {
	a := types.NamespacedName{Namespace: "c", Name: "ab"}
	b := types.NamespacedName{Namespace: "bc", Name: "a"} // "T"+"a"+"bc" == "T"+"ab"+"c"
	d := types.NamespacedName{Namespace: "c", Name: "d"}
	type op struct {
		name    string
		del     bool
		key     types.NamespacedName
		token   string
		wantErr string
		// leads maps a path (by key and token) to the key it must lead
		// to; a zero key: the path must be unknown.
		leads map[[2]string]types.NamespacedName
	}
	p := func(k types.NamespacedName, tok string) [2]string { return [2]string{k.String(), tok} }
	ops := []op{
		{name: "set a", key: a, token: "T", leads: map[[2]string]types.NamespacedName{p(a, "T"): a}},
		{name: "set d", key: d, token: "U", leads: map[[2]string]types.NamespacedName{p(a, "T"): a, p(d, "U"): d}},
		{name: "b collides with a", key: b, token: "T", wantErr: "another Sync",
			leads: map[[2]string]types.NamespacedName{p(a, "T"): a, p(d, "U"): d}},
		{name: "rotate a", key: a, token: "T2", leads: map[[2]string]types.NamespacedName{p(a, "T"): {}, p(a, "T2"): a}},
		{name: "b now free", key: b, token: "T", leads: map[[2]string]types.NamespacedName{p(b, "T"): b, p(a, "T2"): a}},
		{name: "empty token refused", key: d, token: "", wantErr: "empty",
			leads: map[[2]string]types.NamespacedName{p(d, "U"): {}, p(a, "T2"): a, p(b, "T"): b}},
		{name: "set d", key: d, token: "U", leads: map[[2]string]types.NamespacedName{p(d, "U"): d}},
		{name: "delete d", del: true, key: d, leads: map[[2]string]types.NamespacedName{p(d, "U"): {}, p(a, "T2"): a, p(b, "T"): b}},
		{name: "delete d again", del: true, key: d, leads: map[[2]string]types.NamespacedName{p(a, "T2"): a}},
		{name: "set a again, same token", key: a, token: "T2", leads: map[[2]string]types.NamespacedName{p(a, "T2"): a}},
	}
	x := &Index{}
	for _, o := range ops {
		if o.del {
			x.Delete(o.key)
		} else {
			path, err := x.Set(o.key, []byte(o.token))
			switch {
			case o.wantErr == "" && err != nil:
				t.Fatalf("%s: Set: %v", o.name, err)
			case o.wantErr != "" && (err == nil || !strings.Contains(err.Error(), o.wantErr)):
				t.Fatalf("%s: Set: error %v, want one containing %q", o.name, err, o.wantErr)
			case o.wantErr != "" && !strings.HasPrefix(err.Error(), "Sync "+o.key.String()+":"):
				t.Errorf("%s: error does not start with the Sync: %v", o.name, err)
			case err == nil && path != Path(o.key, []byte(o.token)):
				t.Errorf("%s: Set returned %q, want Path %q", o.name, path, Path(o.key, []byte(o.token)))
			}
		}
		for kt, want := range o.leads {
			ns, name, _ := strings.Cut(kt[0], "/")
			path := Path(types.NamespacedName{Namespace: ns, Name: name}, []byte(kt[1]))
			e, ok := x.lookup(path)
			switch {
			case want == (types.NamespacedName{}) && ok:
				t.Errorf("%s: path of %s with token %q leads to %s, want unknown", o.name, kt[0], kt[1], e.key)
			case want != (types.NamespacedName{}) && (!ok || e.key != want || string(e.token) != kt[1]):
				t.Errorf("%s: path of %s with token %q leads to %v (%v), want %s", o.name, kt[0], kt[1], e.key, ok, want)
			}
		}
	}
	if _, ok := (*Index)(nil).lookup("/hook/x"); ok {
		t.Error("a nil Index knows a path")
	}
}
