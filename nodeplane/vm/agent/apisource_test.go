package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

func init() { ctrllog.SetLogger(logr.Discard()) } // controlplane.Start logs through controller-runtime

// apiEnv is a real API server with the graph's VM and VMI CRDs.
type apiEnv struct {
	cfg    *rest.Config
	c      client.Client
	scheme *runtime.Scheme
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	cp, c, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances")
	return &apiEnv{cfg: cp.Config, c: c, scheme: scheme}
}

// createVMI creates a VMI and, when nodeName is set, binds it as the
// scheduler does (status.nodeName, phase Scheduled).
func (e *apiEnv) createVMI(t *testing.T, ns, name, nodeName string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	return e.createLabelledVMI(t, ns, name, nodeName, "")
}

// createLabelledVMI is createVMI with the label kubevirt.io/nodeName =
// label set at creation ("": none), as the scheduler sets it before it
// binds.
func (e *apiEnv) createLabelledVMI(t *testing.T, ns, name, nodeName, label string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	ctx := context.Background()
	if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if label != "" {
		vmi.Labels = map[string]string{agent.NodeNameLabel: label}
	}
	q := resource.MustParse("64Mi")
	grace := int64(0)
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	if err := e.c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	if nodeName != "" {
		vmi.Status.NodeName, vmi.Status.Phase = nodeName, kubevirtv1.Scheduled
		vmi.Status.PhaseTransitionTimestamps = []kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: kubevirtv1.Scheduled, PhaseTransitionTimestamp: metav1.Now()}}
		if err := e.c.Status().Update(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	return vmi
}

func (e *apiEnv) getVMI(t *testing.T, ns, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return vmi
}

func startSource(t *testing.T, e *apiEnv, node string) (*agent.APISource, context.Context) {
	t.Helper()
	return startSourceWith(t, e, agent.DefaultAPIOptions(node))
}

func startSourceWith(t *testing.T, e *apiEnv, opts agent.APIOptions) (*agent.APISource, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts.RetryAfter = 200 * time.Millisecond
	opts.Log = testr.New(t)
	src, err := agent.NewAPISource(e.cfg, e.scheme, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return src, ctx
}

// TestAPISourceRunsVMIs runs the agent (on libvirt's test driver) with
// the API source against a real API server: the VMI bound to the node is
// started and reported Running and Ready with the agent's finalizer; VMIs
// of another node or of none are neither touched nor run; deleting the
// VMI removes its domain, then its finalizer, so that the object goes.
func TestAPISourceRunsVMIs(t *testing.T) {
	e := newAPIEnv(t)
	hv := privateNode(t)
	src, ctx := startSource(t, e, "node-a")
	opts := agent.DefaultOptions("node-a")
	opts.Domain.DomainType, opts.Domain.Emulator = "test", ""
	opts.DefaultGracePeriod = 0
	opts.Log = testr.New(t)
	done := make(chan error, 1)
	go func() { done <- agent.New(hv, opts).Run(ctx, src, time.Minute) }()

	start := time.Now()
	e.createVMI(t, "ns", "mine", "node-a")
	e.createVMI(t, "ns", "theirs", "node-b")
	e.createVMI(t, "ns", "pending", "")
	created := time.Since(start)
	var vmi *kubevirtv1.VirtualMachineInstance
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vmi = e.getVMI(t, "ns", "mine")
		r, _ := ready(vmi.Status)
		return vmi.Status.Phase == kubevirtv1.Running && r == "True"
	})
	t.Logf("latency: creating the three VMIs %s; then -> Running/Ready in the API %s", created.Round(time.Millisecond), (time.Since(start) - created).Round(time.Millisecond))
	if !controllerutil.ContainsFinalizer(vmi, agent.Finalizer) {
		t.Errorf("finalizers %v, want %s", vmi.Finalizers, agent.Finalizer)
	}
	if vmi.Status.NodeName != "node-a" || phases(vmi.Status) != "Scheduled,Running" {
		t.Errorf("status nodeName %q phases %q", vmi.Status.NodeName, phases(vmi.Status))
	}
	wantDomain(t, hv, "ns_mine", hypervisor.Running)
	for _, other := range []string{"theirs", "pending"} {
		v := e.getVMI(t, "ns", other)
		if len(v.Finalizers) != 0 || v.Status.Phase == kubevirtv1.Running {
			t.Errorf("VMI ns/%s of another node: finalizers %v phase %s", other, v.Finalizers, v.Status.Phase)
		}
		wantNoDomain(t, hv, "ns_"+other)
	}
	if got := src.List(); len(got) != 1 || got[0].Name != "mine" {
		t.Errorf("List gave %d VMIs, want ns/mine only", len(got))
	}

	start = time.Now()
	if err := e.c.Delete(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.getVMI(t, "ns", "mine") == nil })
	t.Logf("latency: VMI deleted -> domain removed and object gone %s", time.Since(start).Round(time.Millisecond))
	wantNoDomain(t, hv, "ns_mine")
	if src.Pending() != 0 {
		t.Errorf("%d reports still pending", src.Pending())
	}
	select {
	case err := <-done:
		t.Fatalf("Run ended early: %v", err)
	default:
	}
}

// TestAPISourceStore: a report is written only to the VMI of its UID (a
// VMI recreated under the same name is left alone, and the report is
// dropped, not retried forever); a report of a VMI that is gone is
// dropped; List overlays a stored status before the cache shows it.
func TestAPISourceStore(t *testing.T) {
	e := newAPIEnv(t)
	src, _ := startSource(t, e, "node-a")
	old := e.createVMI(t, "ns", "v", "node-a")
	controlplane.Eventually(t, 10*time.Second, func() bool { return len(src.List()) == 1 })

	st := *old.Status.DeepCopy()
	st.Phase = kubevirtv1.Running
	src.Store(agent.Report{Namespace: "ns", Name: "v", UID: old.UID, Status: st})
	if got := src.List(); len(got) != 1 || got[0].Status.Phase != kubevirtv1.Running {
		t.Errorf("List right after Store: want the stored phase Running overlaid")
	}
	if v := e.getVMI(t, "ns", "v"); v.Status.Phase != kubevirtv1.Running || !controllerutil.ContainsFinalizer(v, agent.Finalizer) {
		t.Errorf("stored VMI: phase %s finalizers %v", v.Status.Phase, v.Finalizers)
	}

	// recreate under the same name: the old VMI's report must not land
	v := e.getVMI(t, "ns", "v")
	controllerutil.RemoveFinalizer(v, agent.Finalizer)
	if err := e.c.Update(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 10*time.Second, func() bool { return e.getVMI(t, "ns", "v") == nil })
	fresh := e.createVMI(t, "ns", "v", "node-a")
	st.Phase = kubevirtv1.Failed
	src.Store(agent.Report{Namespace: "ns", Name: "v", UID: old.UID, Status: st})
	if got := e.getVMI(t, "ns", "v"); got.UID != fresh.UID || got.Status.Phase != kubevirtv1.Scheduled || len(got.Finalizers) != 0 {
		t.Errorf("recreated VMI after a report of the old one: uid %s phase %s finalizers %v", got.UID, got.Status.Phase, got.Finalizers)
	}
	src.Store(agent.Report{Namespace: "ns", Name: "gone", UID: "nope", Status: st})
	if src.Pending() != 0 {
		t.Errorf("%d reports pending, want the two reports of absent VMIs dropped", src.Pending())
	}
}

// TestAPISourceNeedsCRD: without the VMI CRD the source refuses to start
// with an error saying so.
func TestAPISourceNeedsCRD(t *testing.T) {
	cp, _, _ := controlplane.StartEnvForTest(t)
	src, err := agent.NewAPISource(cp.Config, nil, agent.DefaultAPIOptions("n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = src.Start(ctx)
	var want = "watching VirtualMachineInstances (is the kubevirt.io CRD installed?)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Start without the CRD: %v, want %q", err, want)
	}
}

// TestAPISourceRetriesRefusedReports: while the API server refuses VMI
// status writes (a ValidatingAdmissionPolicy denying
// virtualmachineinstances/status), a stored report stays pending and List
// gives its status; once writes are allowed again the retry loop stores
// it, without another Store.
func TestAPISourceRetriesRefusedReports(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	src, _ := startSource(t, e, "node-a")
	vmi := e.createVMI(t, "ns", "v", "node-a")
	controlplane.Eventually(t, 10*time.Second, func() bool { return len(src.List()) == 1 })

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-vmi-status"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"v1"},
						Resources: []string{"virtualmachineinstances/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "status frozen by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-vmi-status"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// the policy is in force once a status write of the test is refused
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := e.getVMI(t, "ns", "v")
		v.Status.Reason = "probe"
		return e.c.Status().Update(ctx, v) != nil
	})

	st := *vmi.Status.DeepCopy()
	st.Phase = kubevirtv1.Running
	src.Store(agent.Report{Namespace: "ns", Name: "v", UID: vmi.UID, Status: st})
	if src.Pending() != 1 {
		t.Fatalf("%d reports pending while status writes are refused, want 1", src.Pending())
	}
	if got := src.List(); len(got) != 1 || got[0].Status.Phase != kubevirtv1.Running {
		t.Errorf("List while the report is pending: want its phase Running overlaid")
	}
	if v := e.getVMI(t, "ns", "v"); v.Status.Phase == kubevirtv1.Running {
		t.Fatalf("the API stored phase Running although status writes are refused")
	}

	if err := e.c.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.getVMI(t, "ns", "v").Status.Phase == kubevirtv1.Running && src.Pending() == 0
	})
	t.Logf("the pending report was stored %s after writes were allowed again (retry every 200 ms)", time.Since(start).Round(time.Millisecond))
}

// TestAPISourceNodeLabel: the source's caches select on
// kubevirt.io/nodeName. By default List gives the node's VMIs labelled for
// it and those bound without the label (hand-bound, older objects); with
// LabelledOnly only the labelled ones. A VMI labelled for another node is
// in neither cache, even with status.nodeName naming this node (the
// scheduler fixes such a label). A node name that is no label value is
// refused up front.
func TestAPISourceNodeLabel(t *testing.T) {
	e := newAPIEnv(t)
	all, _ := startSource(t, e, "node-a")
	lopts := agent.DefaultAPIOptions("node-a")
	lopts.LabelledOnly = true
	labelled, _ := startSourceWith(t, e, lopts)
	e.createLabelledVMI(t, "ns", "labelled", "node-a", "node-a")
	e.createLabelledVMI(t, "ns", "hand", "node-a", "")
	e.createLabelledVMI(t, "ns", "mislabelled", "node-a", "node-b")
	e.createLabelledVMI(t, "ns", "theirs", "node-b", "node-b")
	e.createLabelledVMI(t, "ns", "pending", "", "")
	names := func(src *agent.APISource) string {
		var out []string
		for _, v := range src.List() {
			out = append(out, v.Name)
		}
		return strings.Join(out, ",")
	}
	// the sources see the objects once their watch delivered them
	var gotAll, gotLabelled string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last List: default source %q, LabelledOnly source %q", gotAll, gotLabelled)
		}
	})
	settled := func(wantAll, wantLabelled string) func() bool {
		return func() bool {
			gotAll, gotLabelled = names(all), names(labelled)
			return gotAll == wantAll && gotLabelled == wantLabelled
		}
	}
	controlplane.Eventually(t, 30*time.Second, settled("hand,labelled", "labelled"))
	// a later update of the VMI labelled for node-b, then a new VMI of
	// node-a: once both sources show the new one, the other is still out
	v := e.getVMI(t, "ns", "mislabelled")
	v.Annotations = map[string]string{"touched": "yes"}
	if err := e.c.Update(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	e.createLabelledVMI(t, "ns", "sentinel", "node-a", "node-a")
	controlplane.Eventually(t, 30*time.Second, settled("hand,labelled,sentinel", "labelled,sentinel"))

	_, err := agent.NewAPISource(e.cfg, e.scheme, agent.DefaultAPIOptions(strings.Repeat("n", 64)+".example"))
	if err == nil || !strings.Contains(err.Error(), "is not a valid value of label kubevirt.io/nodeName") {
		t.Errorf("NewAPISource with a 70-character node name: %v, want a refusal naming the label", err)
	}
}
