package operand

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Workload is one DaemonSet or Deployment an operator applied, as the
// readiness rules see it.
type Workload struct {
	// Kind is DaemonSet or Deployment.
	Kind      string
	Namespace string
	Name      string
	// Found is false when the object is not in the cache (yet).
	Found bool
	// Generation and ObservedGeneration are the object's and its
	// controller's.
	Generation, ObservedGeneration int64
	// Desired is a DaemonSet's status.desiredNumberScheduled or a
	// Deployment's spec.replicas; Ready, Available and Updated are
	// numberReady, numberAvailable and updatedNumberScheduled, or
	// readyReplicas, availableReplicas and updatedReplicas.
	Desired, Ready, Available, Updated int32
	// Pods are the workload's pods (its selector, its namespace).
	Pods []Pod
	// CreateError is, while the workload has no pod, why its controller
	// could not create one: the reason and message of its latest
	// FailedCreate event ("" when none).
	CreateError string
}

// Pod is what the readiness rules need of one pod.
type Pod struct {
	Name string
	// Phase is status.phase (Pending, Running, …).
	Phase string
	// Ready is the Ready condition.
	Ready bool
	// Terminating: deletionTimestamp set.
	Terminating bool
	// Node is spec.nodeName: "" until a scheduler binds the pod.
	Node string
	// Unscheduled is why the scheduler has not placed it (its
	// PodScheduled=False reason and message); "" once scheduled.
	Unscheduled string
	// Failing is why a container cannot run (crash loop, image pull,
	// bad configuration), naming the container; "" when none fails.
	Failing string
	// Waiting is a container's waiting reason that is not a failure
	// (ContainerCreating, PodInitializing), naming the container.
	Waiting string
}

// failingReasons are the container waiting reasons that mean it cannot
// run without a change (the kubelet's; kubelet/images and kuberuntime).
var failingReasons = map[string]bool{
	"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"ErrImageNeverPull": true, "CreateContainerConfigError": true, "CreateContainerError": true,
	"RunContainerError": true, "PreStartHookError": true, "PostStartHookError": true,
}

// PodOf gives what the readiness rules need of p: a container waiting with
// one of the kubelet's failure reasons (CrashLoopBackOff, ImagePullBackOff,
// ErrImagePull, CreateContainerConfigError, …) or a failed init container
// makes it Failing, with the container, the reason, its restarts and the
// kubelet's message; so does a container whose last run ended with a
// non-zero exit code, which the kubelet reports before CrashLoopBackOff
// (and may not report as CrashLoopBackOff at all when its back-off ends
// before its next status write).
func PodOf(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName, Terminating: p.DeletionTimestamp != nil}
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			out.Ready = c.Status == corev1.ConditionTrue
		case corev1.PodScheduled:
			if c.Status == corev1.ConditionFalse {
				out.Unscheduled = strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
			}
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil {
			msg := fmt.Sprintf("container %s %s", cs.Name, w.Reason)
			if cs.RestartCount > 0 {
				msg += fmt.Sprintf(" (%d restarts)", cs.RestartCount)
			}
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if failingReasons[w.Reason] {
				if out.Failing == "" {
					out.Failing = msg
				}
			} else if out.Waiting == "" && w.Reason != "" {
				out.Waiting = msg
			}
		}
		// A container of a pod being deleted ends however its process
		// takes the kill: that is the deletion, not a failure.
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && out.Failing == "" && !out.Terminating {
			out.Failing = fmt.Sprintf("container %s terminated: %s (exit code %d)", cs.Name, strings.TrimSpace(t.Reason+" "+t.Message), t.ExitCode)
			if cs.RestartCount > 0 {
				out.Failing += fmt.Sprintf(" (%d restarts)", cs.RestartCount)
			}
		}
	}
	return out
}

// DaemonSetWorkload gives the Workload of ds with its pods.
func DaemonSetWorkload(ds *appsv1.DaemonSet, pods []corev1.Pod) Workload {
	w := Workload{Kind: "DaemonSet", Namespace: ds.Namespace, Name: ds.Name, Found: true,
		Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
		Desired: ds.Status.DesiredNumberScheduled, Ready: ds.Status.NumberReady,
		Available: ds.Status.NumberAvailable, Updated: ds.Status.UpdatedNumberScheduled}
	for i := range pods {
		w.Pods = append(w.Pods, PodOf(&pods[i]))
	}
	return w
}

// DeploymentWorkload gives the Workload of d with its pods.
func DeploymentWorkload(d *appsv1.Deployment, pods []corev1.Pod) Workload {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	w := Workload{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, Found: true,
		Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
		Desired: replicas, Ready: d.Status.ReadyReplicas, Available: d.Status.AvailableReplicas, Updated: d.Status.UpdatedReplicas}
	for i := range pods {
		w.Pods = append(w.Pods, PodOf(&pods[i]))
	}
	return w
}

// Readiness is what Assess finds of an operator's workloads.
type Readiness struct {
	// Ready: every workload has observed its generation and has all its
	// desired pods (at least one) updated, ready and available.
	Ready bool
	// Failing names, when a pod of a workload fails (PodOf), the workload
	// and the pod: "DaemonSet ns/name: pod p: container c
	// CrashLoopBackOff (3 restarts): …".
	Failing string
	// Message says what is not ready, one clause per workload that is
	// not, "; "-joined; "" when Ready.
	Message string
}

// Assess judges ws as virt-operator judges its DaemonSets and Deployments
// (kubevirt pkg/virt-operator/util/readycheck.go DaemonsetIsReady,
// DeploymentIsReady): a workload is ready when its controller observed
// its generation and its desired pods — at least one; a DaemonSet no node
// is desired on is not ready — are all updated, ready and available. For
// each workload that is not, the message says why and names the pod
// that holds it: failing first, then unscheduled, terminating or waiting.
// No workloads at all is Ready (a component without workloads).
func Assess(ws []Workload) Readiness {
	var msgs, failing []string
	for _, w := range ws {
		what := fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
		pods := append([]Pod(nil), w.Pods...)
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		for _, p := range pods {
			if p.Failing != "" {
				failing = append(failing, fmt.Sprintf("%s: pod %s: %s", what, p.Name, p.Failing))
				break
			}
		}
		if len(pods) == 0 && w.CreateError != "" {
			failing = append(failing, fmt.Sprintf("%s: no pod created: %s", what, w.CreateError))
		}
		if why := notReady(w, pods); why != "" {
			msgs = append(msgs, what+": "+why)
		}
	}
	r := Readiness{Ready: len(msgs) == 0, Message: strings.Join(msgs, "; ")}
	if len(failing) > 0 {
		r.Failing = strings.Join(failing, "; ")
	}
	return r
}

// notReady says why w is not ready ("" when it is).
func notReady(w Workload, pods []Pod) string {
	switch {
	case !w.Found:
		return "not found"
	case w.ObservedGeneration < w.Generation:
		return fmt.Sprintf("waiting for its controller to observe generation %d (observed %d)", w.Generation, w.ObservedGeneration)
	case w.Desired == 0 && w.Kind == "DaemonSet":
		return "no node to run on (desiredNumberScheduled 0: no node matches its placement)"
	case w.Desired == 0:
		return "scaled to 0 replicas"
	}
	var parts []string
	if w.Updated < w.Desired {
		parts = append(parts, fmt.Sprintf("%d of %d pods updated", w.Updated, w.Desired))
	}
	if w.Ready < w.Desired {
		parts = append(parts, fmt.Sprintf("%d of %d pods ready", w.Ready, w.Desired))
	} else if w.Available < w.Desired {
		parts = append(parts, fmt.Sprintf("%d of %d pods available", w.Available, w.Desired))
	}
	if len(parts) == 0 {
		return ""
	}
	if len(pods) == 0 && w.CreateError != "" {
		parts = append(parts, "no pod created: "+w.CreateError)
	} else if p := holding(pods); p != "" {
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// holding names the first pod that is not ready and why: failing,
// unscheduled, terminating, waiting, or its phase.
func holding(pods []Pod) string {
	for _, p := range pods {
		switch {
		case p.Ready && !p.Terminating:
			continue
		case p.Failing != "":
			return fmt.Sprintf("pod %s: %s", p.Name, p.Failing)
		case p.Terminating:
			return fmt.Sprintf("pod %s terminating", p.Name)
		case p.Unscheduled != "":
			return fmt.Sprintf("pod %s not scheduled: %s", p.Name, p.Unscheduled)
		case p.Node == "":
			return fmt.Sprintf("pod %s %s: not scheduled to a node yet", p.Name, p.Phase)
		case p.Waiting != "":
			return fmt.Sprintf("pod %s %s: %s", p.Name, p.Phase, p.Waiting)
		default:
			return fmt.Sprintf("pod %s %s, not ready", p.Name, p.Phase)
		}
	}
	if len(pods) == 0 {
		return "no pod created yet"
	}
	return ""
}
