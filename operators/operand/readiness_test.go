package operand

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ds is a DaemonSet Workload ns/agent with generation 2 observed, n pods
// desired, ready of them ready (and available, updated), and pods.
func ds(n, ready int32, pods ...Pod) Workload {
	return Workload{Kind: "DaemonSet", Namespace: "ns", Name: "agent", Found: true, Generation: 2, ObservedGeneration: 2,
		Desired: n, Ready: ready, Available: ready, Updated: n, Pods: pods}
}

func TestAssess(t *testing.T) {
	running := Pod{Name: "agent-a", Phase: "Running", Node: "n1", Ready: true}
	for _, tc := range []struct {
		name      string
		ws        []Workload
		ready     bool
		message   []string // each in Message
		failing   string   // in Failing ("" : Failing empty)
		noMessage bool
	}{
		{name: "no workloads", ready: true, noMessage: true},
		{name: "all ready", ws: []Workload{ds(1, 1, running)}, ready: true, noMessage: true},
		{name: "not in the cache yet", ws: []Workload{{Kind: "DaemonSet", Namespace: "ns", Name: "agent"}},
			message: []string{"DaemonSet ns/agent: not found"}},
		{name: "generation not observed", ws: []Workload{func() Workload { w := ds(1, 1, running); w.Generation = 3; return w }()},
			message: []string{"DaemonSet ns/agent: waiting for its controller to observe generation 3 (observed 2)"}},
		{name: "no node to run on (virt-operator's DesiredNumberScheduled 0)", ws: []Workload{ds(0, 0)},
			message: []string{"DaemonSet ns/agent: no node to run on (desiredNumberScheduled 0"}},
		{name: "pod created, no scheduler bound it", ws: []Workload{ds(1, 0, Pod{Name: "agent-x", Phase: "Pending"})},
			message: []string{"DaemonSet ns/agent: 0 of 1 pods ready, pod agent-x Pending: not scheduled to a node yet"}},
		{name: "pod unschedulable", ws: []Workload{ds(1, 0, Pod{Name: "agent-x", Phase: "Pending", Unscheduled: "Unschedulable: 0/1 nodes are available"})},
			message: []string{"pod agent-x not scheduled: Unschedulable: 0/1 nodes are available"}},
		{name: "pod being created on its node", ws: []Workload{ds(1, 0, Pod{Name: "agent-x", Phase: "Pending", Node: "n1", Waiting: "container vm-agent ContainerCreating"})},
			message: []string{"pod agent-x Pending: container vm-agent ContainerCreating"}},
		{name: "crash loop: failing names the workload and the pod", ws: []Workload{ds(1, 0, Pod{Name: "agent-x", Phase: "Running", Node: "n1", Failing: "container vm-agent CrashLoopBackOff (4 restarts): back-off 40s"})},
			message: []string{"0 of 1 pods ready, pod agent-x: container vm-agent CrashLoopBackOff"},
			failing: "DaemonSet ns/agent: pod agent-x: container vm-agent CrashLoopBackOff (4 restarts): back-off 40s"},
		{name: "pod deleted: the old one terminating, its replacement pending", ws: []Workload{ds(1, 0,
			Pod{Name: "agent-b", Phase: "Pending", Node: "n1", Waiting: "container vm-agent ContainerCreating"},
			Pod{Name: "agent-a", Phase: "Running", Node: "n1", Ready: true, Terminating: true})},
			message: []string{"0 of 1 pods ready, pod agent-a terminating"}},
		{name: "rolling update", ws: []Workload{func() Workload { w := ds(2, 2, running, running); w.Updated = 1; return w }()},
			message: []string{"1 of 2 pods updated"}},
		{name: "ready but not available yet (minReadySeconds)", ws: []Workload{func() Workload { w := ds(1, 1, running); w.Available = 0; return w }()},
			message: []string{"0 of 1 pods available"}},
		{name: "two workloads, one not ready", ws: []Workload{ds(1, 1, running), {Kind: "Deployment", Namespace: "ns", Name: "api", Found: true, Desired: 2, Ready: 1, Available: 1, Updated: 2,
			Pods: []Pod{{Name: "api-1", Phase: "Running", Node: "n1", Ready: true}, {Name: "api-2", Phase: "Running", Node: "n1"}}}},
			message: []string{"Deployment ns/api: 1 of 2 pods ready, pod api-2 Running, not ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Assess(tc.ws)
			if r.Ready != tc.ready {
				t.Errorf("Ready = %v, want %v (%s)", r.Ready, tc.ready, r.Message)
			}
			if tc.noMessage && r.Message != "" {
				t.Errorf("Message = %q, want none", r.Message)
			}
			for _, m := range tc.message {
				if !strings.Contains(r.Message, m) {
					t.Errorf("Message = %q, want it to contain %q", r.Message, m)
				}
			}
			if r.Failing != tc.failing {
				t.Errorf("Failing = %q, want %q", r.Failing, tc.failing)
			}
		})
	}
}

func TestPodOf(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want Pod
	}{
		{name: "created, not scheduled", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			want: Pod{Name: "p", Phase: "Pending"}},
		{name: "unschedulable", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}}},
			want: Pod{Name: "p", Phase: "Pending", Unscheduled: "Unschedulable: 0/1 nodes are available"}},
		{name: "ready", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
			want: Pod{Name: "p", Phase: "Running", Node: "n1", Ready: true}},
		{name: "crash loop", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 3, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=c"}}}}}},
			want: Pod{Name: "p", Phase: "Running", Node: "n1", Failing: "container c CrashLoopBackOff (3 restarts): back-off 40s restarting failed container=c"}},
		{name: "image pull", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}}},
			want: Pod{Name: "p", Phase: "Pending", Node: "n1", Failing: "container init ImagePullBackOff: Back-off pulling image"}},
		{name: "creating", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}},
			want: Pod{Name: "p", Phase: "Pending", Node: "n1", Waiting: "container c ContainerCreating"}},
		{name: "exited with an error", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}}},
			want: Pod{Name: "p", Phase: "Failed", Node: "n1", Failing: "container c terminated: Error (exit code 2)"}},
		{name: "killed, restarted once, killed again", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 1, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}}}}},
			want: Pod{Name: "p", Phase: "Running", Node: "n1", Failing: "container c terminated: Error (exit code 137) (1 restarts)"}},
		{name: "deleted, its container killed with an error", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}},
			want: Pod{Name: "p", Phase: "Failed", Node: "n1", Terminating: true}},
		{name: "terminating", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			want: Pod{Name: "p", Phase: "Running", Node: "n1", Terminating: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodOf(&tc.pod); got != tc.want {
				t.Errorf("PodOf = %+v\nwant    %+v", got, tc.want)
			}
		})
	}
}

func TestDaemonSetWorkload(t *testing.T) {
	d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Generation: 4},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 2, NumberReady: 1, NumberAvailable: 1, UpdatedNumberScheduled: 2}}
	w := DaemonSetWorkload(d, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}})
	want := Workload{Kind: "DaemonSet", Namespace: "ns", Name: "a", Found: true, Generation: 4, ObservedGeneration: 3,
		Desired: 2, Ready: 1, Available: 1, Updated: 2}
	if len(w.Pods) != 1 || w.Pods[0].Name != "a-1" {
		t.Errorf("pods %+v", w.Pods)
	}
	w.Pods = nil
	if !reflect.DeepEqual(w, want) {
		t.Errorf("DaemonSetWorkload = %+v, want %+v", w, want)
	}
}

// TestSpecChanged: only a new workload or another generation is a
// change; the same generations (a pod deleted, status moving) are not.
func TestSpecChanged(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after map[string]int64
		want          bool
	}{
		{"same generations", map[string]int64{"ds": 3}, map[string]int64{"ds": 3}, false},
		{"generation moved", map[string]int64{"ds": 3}, map[string]int64{"ds": 4}, true},
		{"workload created", map[string]int64{}, map[string]int64{"ds": 1}, true},
		{"workload pruned only", map[string]int64{"ds": 1, "dep": 2}, map[string]int64{"ds": 1}, false},
		{"nothing before or after", nil, nil, false},
	} {
		if got := specChanged(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: specChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
