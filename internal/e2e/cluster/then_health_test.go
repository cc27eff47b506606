package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// operandCR names one operand CR of the example and a role its operator
// runs.
type operandCR struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	// daemonSet and selector are the role's DaemonSet (in hcNamespace,
	// where the native operators run the example's roles) and its pods.
	daemonSet, selector string
	// command is a word of the role container's command line, to find
	// its process on the node.
	command string
	// container is the name of that container in the pod.
	container string
}

var (
	kubeVirtCR = operandCR{
		gvr:       schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"},
		namespace: hcNamespace, name: "kubevirt-" + hcName,
		daemonSet: "converge-vm-agent", selector: "k8s-app=converge-vm-agent",
	}
	networkAddonsCR = operandCR{
		gvr:       schema.GroupVersionResource{Group: "networkaddonsoperator.network.kubevirt.io", Version: "v1", Resource: "networkaddonsconfigs"},
		name:      "cluster",
		daemonSet: "converge-bridge-marker", selector: "k8s-app=converge-bridge-marker",
		command: "bridge-marker", container: "bridge-marker",
	}
)

// conditionLog records every Available/Progressing/Degraded state a CR
// passes through, as its watch delivers them.
type conditionLog struct {
	mu     sync.Mutex
	states []string
}

// add records u's conditions when they differ from the last state.
func (l *conditionLog) add(u *unstructured.Unstructured) {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, typ := range []string{"Available", "Progressing", "Degraded"} {
		for _, c := range raw {
			m, _ := c.(map[string]any)
			if m["type"] == typ {
				parts = append(parts, fmt.Sprintf("%s=%s %s: %s", typ, m["status"], m["reason"], m["message"]))
			}
		}
	}
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	parts = append(parts, fmt.Sprintf("generation %d observed %d", u.GetGeneration(), og))
	s := strings.Join(parts, " | ")
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.states); n == 0 || l.states[n-1] != s {
		l.states = append(l.states, s)
	}
}

// find gives the first recorded state with every one of wants, "" when
// none.
func (l *conditionLog) find(wants ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, s := range l.states {
		for _, w := range wants {
			if !strings.Contains(s, w) {
				continue next
			}
		}
		return s
	}
	return ""
}

// String lists the states recorded.
func (l *conditionLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "  " + strings.Join(l.states, "\n  ")
}

// watchConditions records the conditions of cr from now until the test
// ends, read every 100 ms (a watch can end early without a word; a
// Degraded the tests look for lasts seconds).
func watchConditions(t *testing.T, ctx context.Context, e *cluster.Env, cr operandCR) *conditionLog {
	t.Helper()
	dc, err := dynamic.NewForConfig(e.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	l := &conditionLog{}
	res := dc.Resource(cr.gvr).Namespace(cr.namespace)
	if u, err := res.Get(ctx, cr.name, metav1.GetOptions{}); err != nil {
		t.Fatalf("reading %s %s: %v", cr.gvr.Resource, cr.name, err)
	} else {
		l.add(u)
	}
	go func() {
		for ctx.Err() == nil {
			if u, err := res.Get(ctx, cr.name, metav1.GetOptions{}); err == nil {
				l.add(u)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return l
}

// observeWorkload records, every 100 ms until ctx ends, the readiness of
// a role's DaemonSet and its pods as the API server has them: what the
// operator's conditions are judged against when a test fails.
func observeWorkload(ctx context.Context, e *cluster.Env, cr operandCR) *conditionLog {
	l := &conditionLog{}
	go func() {
		last := ""
		for ctx.Err() == nil {
			ds, err := e.Clientset.AppsV1().DaemonSets(hcNamespace).Get(ctx, cr.daemonSet, metav1.GetOptions{})
			state := ""
			if err != nil {
				state = err.Error()
			} else {
				state = fmt.Sprintf("DaemonSet desired %d ready %d available %d", ds.Status.DesiredNumberScheduled, ds.Status.NumberReady, ds.Status.NumberAvailable)
				pods, _ := podsOf(ctx, e.Clientset, hcNamespace, cr.selector)
				for i := range pods {
					state += "; " + describePod(&pods[i])
				}
			}
			if state != last {
				l.mu.Lock()
				l.states = append(l.states, time.Now().Format("15:04:05.000")+" "+state)
				l.mu.Unlock()
				last = state
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return l
}

// TestOperandHealth: on the example's Sync, Ready through the native
// operators, the operand CRs' conditions follow their roles' pods on the
// node. Deleting the VM agent's pod turns the KubeVirt Degraded
// (ComponentNotReady, naming the DaemonSet) until the DaemonSet's new pod
// is ready, and it is Available again; killing bridge-marker's process
// twice (SIGKILL, crashes) puts its container in CrashLoopBackOff, which turns
// the NetworkAddonsConfig Degraded (ComponentFailing, naming the pod and
// the container) until the kubelet restarts it. The Sync is Ready again
// after each.
func TestOperandHealth(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)

	t.Run("pod deleted", func(t *testing.T) {
		cr := kubeVirtCR
		settled(t, ctx, e, cr)
		log := watchConditions(t, ctx, e, cr)
		obs := observeWorkload(ctx, e, cr)
		defer func() {
			if t.Failed() {
				t.Logf("the DaemonSet and its pods meanwhile:\n%s\nvirt-operator's log:\n%s", obs, logLines(e, "virt-operator", 30))
			}
		}()
		pods, err := podsOf(ctx, e.Clientset, hcNamespace, cr.selector)
		if err != nil || len(pods) != 1 {
			t.Fatalf("pods of %s: %d, %v", cr.daemonSet, len(pods), err)
		}
		if err := e.Clientset.CoreV1().Pods(hcNamespace).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the KubeVirt turns Degraded", func() (bool, string) {
			return log.find("Degraded=True ComponentNotReady", "DaemonSet "+hcNamespace+"/"+cr.daemonSet) != "", log.String()
		})
		eventually(t, 3*time.Minute, "the KubeVirt recovers", func() (bool, string) {
			return log.find("Available=True", "Degraded=False") != "" && strings.HasPrefix(lastState(log), "Available=True"), log.String()
		})
		waitSyncReady(t, ctx, e)
	})

	t.Run("container crash-loops", func(t *testing.T) {
		cr := networkAddonsCR
		settled(t, ctx, e, cr)
		log := watchConditions(t, ctx, e, cr)
		obs := observeWorkload(ctx, e, cr)
		defer func() {
			if t.Failed() {
				t.Logf("the DaemonSet and its pods meanwhile:\n%s\ncontroller: %s", obs, controllerState(e))
			}
		}()
		pods, err := podsOf(ctx, e.Clientset, hcNamespace, cr.selector)
		if err != nil || len(pods) != 1 {
			t.Fatalf("pods of %s: %d, %v", cr.daemonSet, len(pods), err)
		}
		// Two crashes in a row: the kubelet restarts a container at once
		// after its first, then backs off (CrashLoopBackOff, 10 s).
		for i := 0; i < 2; i++ {
			var pid int
			eventually(t, time.Minute, fmt.Sprintf("%s runs (crash %d)", cr.command, i+1), func() (bool, string) {
				var err error
				pid, err = processOf("converge-node", cr.command)
				return err == nil, fmt.Sprint(err)
			})
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("killing %s (pid %d): %v", cr.command, pid, err)
			}
			time.Sleep(time.Second)
		}
		// The kubelet writes CrashLoopBackOff into the pod's status only
		// when a status write falls inside the back-off; on a busy node
		// the 10 s back-off may end first, and the status goes from
		// terminated (exit 137, restarted once) straight to running.
		// Either is the crash loop reported.
		eventually(t, 2*time.Minute, "the NetworkAddonsConfig turns Degraded", func() (bool, string) {
			backoff := log.find("Degraded=True ComponentFailing", "pod "+pods[0].Name, "container "+cr.container+" CrashLoopBackOff")
			again := log.find("Degraded=True ComponentFailing", "pod "+pods[0].Name, "container "+cr.container+" terminated: Error (exit code 137) (1 restarts)")
			return backoff != "" || again != "", log.String()
		})
		eventually(t, 3*time.Minute, "the NetworkAddonsConfig recovers", func() (bool, string) {
			return strings.HasPrefix(lastState(log), "Available=True"), log.String()
		})
		waitSyncReady(t, ctx, e)
	})
}

// lastState gives the last state l recorded.
func lastState(l *conditionLog) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.states) == 0 {
		return ""
	}
	return l.states[len(l.states)-1]
}

// processOf gives the pid of the one process on this machine whose
// command line is exe (by base name) followed by sub as its first
// argument: a role's container process, seen from the node.
func processOf(exe, sub string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 2 && filepath.Base(args[0]) == exe && args[1] == sub {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d processes %q %q on the node (%v), want 1", len(found), exe, sub, found)
	}
	return found[0], nil
}

// logLines gives the last n lines of converge-controller's log that
// mention what, for failures.
func logLines(e *cluster.Env, what string, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := controllerPod(ctx, e)
	if err != nil {
		return err.Error()
	}
	log, err := podLog(ctx, e.Clientset, p.Namespace, p.Name, "manager", false)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// settled waits until cr has been Available at its generation for 3 s:
// right after the Sync turned Ready its reconciles may still change the
// CR's spec, and a pod lost during a spec change is an update in
// progress, not a degradation.
func settled(t *testing.T, ctx context.Context, e *cluster.Env, cr operandCR) {
	t.Helper()
	dc, err := dynamic.NewForConfig(e.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	var since time.Time
	eventually(t, 2*time.Minute, cr.name+" Available at its generation for 3 s", func() (bool, string) {
		u, err := dc.Resource(cr.gvr).Namespace(cr.namespace).Get(ctx, cr.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if availability(u) != "" {
			since = time.Time{}
			return false, availability(u)
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= 3*time.Second, "settling"
	})
}
