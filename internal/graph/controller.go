package graph

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge"
)

// ControllerOptions are the inputs of converge's own bundle
// (components/controller #In); the zero value of a field means the CUE
// default.
type ControllerOptions struct {
	// Namespace the controller runs in (an RFC 1123 label).
	Namespace string
	// Version of converge: the image tag when Image is empty and the
	// app.kubernetes.io/version label.
	Version string
	// Image of converge-controller; empty means
	// ghcr.io/converge-dev/converge-controller:<Version>.
	Image string
	// NodeImage is the converge-node image the native operators' roles run
	// (converge-controller --node-image); empty means
	// ghcr.io/converge-dev/converge-node:<Version>.
	NodeImage string
	// Replicas of the Deployment (leader election is always on).
	Replicas int
	// LogLevel of the controller: debug, info, error or a verbosity > 0.
	LogLevel string
	// Receiver exposes the push-webhook receiver on port 9292.
	Receiver bool
	// Webhook serves the hco-webhook behind the Service's port 443.
	Webhook bool
}

// DefaultControllerOptions gives the bundle's defaults: namespace
// converge-system, version "dev", one replica, log level info, receiver
// and hco-webhook on.
func DefaultControllerOptions() ControllerOptions {
	return ControllerOptions{
		Namespace: "converge-system", Version: "dev", Replicas: 1, LogLevel: "info",
		Receiver: true, Webhook: true,
	}
}

// RenderController evaluates components/controller #Bundle for in and
// gives the objects that run converge-controller, ordered for apply as
// fluxcd/pkg/ssa's ReconcileOrder (the Sync CRD syncs.converge.dev first,
// then the Namespace, the RBAC, the ServiceAccount, the Service and the
// Deployment). Invalid options fail with an *Error naming each option
// and what it must be (`controller bundle: option namespace: invalid
// value "Bad_NS" (out of bound =~"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")`).
func (e *Engine) RenderController(in ControllerOptions) ([]*unstructured.Unstructured, error) {
	crd, err := e.SyncCRD()
	if err != nil {
		return nil, err
	}
	defer e.Lock()()
	pkg, err := e.controllerPackage()
	if err != nil {
		return nil, err
	}
	opts := map[string]any{
		"receiver": in.Receiver, "webhook": in.Webhook, "replicas": in.Replicas,
	}
	for k, v := range map[string]string{"namespace": in.Namespace, "version": in.Version, "image": in.Image, "nodeImage": in.NodeImage, "logLevel": in.LogLevel} {
		if v != "" {
			opts[k] = v
		}
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("controller bundle: %w", err)
	}
	given := e.ctx.CompileBytes(b, cue.Filename("controller options"))
	if err := pkg.LookupPath(cue.MakePath(cue.Def("#In"))).Unify(given).Validate(cue.Concrete(true)); err != nil {
		return nil, optionErrors(err)
	}
	v := pkg.LookupPath(cue.MakePath(cue.Def("#Bundle"))).FillPath(cue.ParsePath("in"), given)
	objs := v.LookupPath(cue.ParsePath("objects"))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, fmt.Errorf("controller bundle: %w", Format(err))
	}
	it, err := objs.Fields()
	if err != nil {
		return nil, fmt.Errorf("controller bundle: %w", Format(err))
	}
	out := []*unstructured.Unstructured{crd}
	for it.Next() {
		var obj map[string]any
		if err := it.Value().Decode(&obj); err != nil {
			return nil, fmt.Errorf("controller bundle: %s: %w", it.Selector(), Format(err))
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	sort.Stable(ssa.SortableUnstructureds(out))
	return out, nil
}

// optionErrors words the errors of invalid options: one line per option,
// "controller bundle: option NAME: MESSAGE", leaving out the alternatives
// of a default (`conflicting values "info" and "loud"`) when a line says
// what the option must be.
func optionErrors(err error) error {
	byPath := map[string][]string{}
	var paths []string
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if strings.Contains(msg, "errors in empty disjunction") {
			continue
		}
		path := strings.TrimPrefix(strings.Join(e.Path(), "."), "#In.")
		if _, ok := byPath[path]; !ok {
			paths = append(paths, path)
		}
		if !slices.Contains(byPath[path], msg) {
			byPath[path] = append(byPath[path], msg)
		}
	}
	var lines []string
	for _, p := range paths {
		msgs := byPath[p]
		if i := slices.IndexFunc(msgs, func(m string) bool { return !strings.HasPrefix(m, "conflicting values") }); i >= 0 {
			msgs = msgs[i : i+1]
		}
		for _, m := range msgs {
			lines = append(lines, "controller bundle: option "+p+": "+m)
		}
	}
	sort.Strings(lines)
	return &Error{Lines: lines}
}

// controllerPackage loads components/controller from the embedded module
// and gives its value (#In, #Bundle). It is loaded on each call, not with
// the engine: only `converge render --controller` and `converge install`
// need it. The caller holds the lock.
func (e *Engine) controllerPackage() (cue.Value, error) {
	insts := load.Instances([]string{"./components/controller"}, &load.Config{FS: converge.CUE, Dir: "/"})
	if insts[0].Err != nil {
		return cue.Value{}, fmt.Errorf("loading embedded CUE components/controller: %w", insts[0].Err)
	}
	v := e.ctx.BuildInstance(insts[0])
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("building embedded CUE components/controller: %w", Format(err))
	}
	return v, nil
}
