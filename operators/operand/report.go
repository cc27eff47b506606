package operand

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types the operators write: HCO's operand conditions
// (hco.md §1.6), which KubeVirt, CDI, CNAO and HPP all report.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// Reasons of the conditions: virt-operator's where it has one (kubevirt
// pkg/virt-operator/util ConditionReason*), converge's where it has none.
const (
	// ReasonReady: every workload is ready (kubevirt
	// ConditionReasonDeploymentReady), message "All components are ready.".
	ReasonReady = "AllComponentsReady"
	// ReasonDeploying: the roles are applied and not ready yet, never
	// having been (ConditionReasonDeploying).
	ReasonDeploying = "DeploymentInProgress"
	// ReasonUpdating: a new generation of the CR is rolling out over
	// roles that were ready (ConditionReasonUpdating).
	ReasonUpdating = "UpdateInProgress"
	// ReasonDeleting: the CR is being deleted (or left native mode) and
	// its roles are removed (ConditionReasonDeleting).
	ReasonDeleting = "DeletionInProgress"
	// ReasonFailed: the roles could not be derived or applied
	// (ConditionReasonDeploymentFailedError).
	ReasonFailed = "DeploymentFailed"
	// ReasonUnsupported: the CR sets a field converge refuses (the roles'
	// refusals); nothing is applied until it changes.
	ReasonUnsupported = "UnsupportedConfiguration"
	// ReasonFailing: a pod of a role cannot run (crash loop, image pull,
	// bad configuration).
	ReasonFailing = "ComponentFailing"
	// ReasonNotReady: a role that was ready at this generation is not any
	// more (a pod deleted, a node lost).
	ReasonNotReady = "ComponentNotReady"
	// ReasonExisting: another CR of a singleton kind is deployed
	// (kubevirt ConditionReasonDeploymentFailedExisting).
	ReasonExisting = "ExistingDeployment"
)

// Phases of status.phase, KubeVirt's KubeVirtPhase and the lifecycle
// SDK's (CDI, HPP) common values.
const (
	PhaseDeploying = "Deploying"
	PhaseDeployed  = "Deployed"
	PhaseDeleting  = "Deleting"
)

// Failure is a reconcile that could not derive or apply the roles.
type Failure struct {
	// Reason is ReasonFailed, ReasonUnsupported or ReasonExisting.
	Reason string
	// Message names what failed and why.
	Message string
}

// Previous is what the CR's status said before this reconcile.
type Previous struct {
	Conditions         []metav1.Condition
	ObservedGeneration int64
	// ObservedVersion is the version last deployed ("" if none).
	ObservedVersion string
}

// Observation is what one reconcile of a CR found: the input of Compute.
type Observation struct {
	// Generation is the CR's metadata.generation.
	Generation int64
	// Version is the version converge deploys: the operator's and the
	// target version.
	Version string
	// Readiness of the workloads applied (Assess).
	Readiness Readiness
	// Failure, when set, is why this reconcile applied nothing.
	Failure *Failure
	// Deleting: the CR is deleted, or left native mode.
	Deleting bool
	// Changed: this reconcile created or changed a workload although the
	// CR's generation did not change (an input changed, or converge's
	// version and so its images): what follows is a rollout, not a loss.
	Changed  bool
	Previous Previous
}

// Report is the status Compute gives a CR, before it is laid out in the
// kind's own field names (StatusFields).
type Report struct {
	// Phase is PhaseDeploying, PhaseDeployed or PhaseDeleting.
	Phase string
	// Conditions are Available, Progressing and Degraded, each keeping
	// its lastTransitionTime while its status does not change.
	Conditions         []metav1.Condition
	ObservedGeneration int64
	// OperatorVersion and TargetVersion are Observation.Version;
	// ObservedVersion is the version deployed: the target once every
	// workload was ready, until then the previous one.
	OperatorVersion, TargetVersion, ObservedVersion string
}

// Compute gives the status of the CR o was observed for, at time now:
//
//   - Deleting: Available=False, Progressing=True, reason
//     DeletionInProgress; phase Deleting.
//   - a Failure: Degraded=True with its reason and message, Progressing
//     False, Available as the workloads are (True, AllComponentsReady,
//     when they are ready).
//   - ready: Available=True, Progressing=False, Degraded=False,
//     AllComponentsReady, "All components are ready."; the target version
//     is observed, phase Deployed.
//   - a pod failing: Degraded=True, Available=False, Progressing=False,
//     ComponentFailing, naming the workload and pod.
//   - not ready although Available at this generation before (a pod
//     deleted, a node lost), and still not ready after that: Degraded=True,
//     Available=False, Progressing=True, ComponentNotReady — unless this
//     reconcile changed a workload (Changed).
//   - not ready after a new generation of a CR that was deployed, or
//     after a change of its workloads at the same generation (Changed):
//     Progressing=True, Available=False, UpdateInProgress.
//   - otherwise: Progressing=True, Available=False, DeploymentInProgress.
//
// Not ready messages are the Readiness's (Assess): each workload not
// ready and why, naming the pod that holds it.
func Compute(o Observation, now metav1.Time) Report {
	r := Report{ObservedGeneration: o.Generation, OperatorVersion: o.Version, TargetVersion: o.Version,
		ObservedVersion: o.Previous.ObservedVersion}
	conds := append([]metav1.Condition(nil), o.Previous.Conditions...)
	set := func(typ string, status bool, reason, msg string) {
		s := metav1.ConditionFalse
		if status {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	wasAvailable := meta.IsStatusConditionTrue(o.Previous.Conditions, ConditionAvailable)
	deg := meta.FindStatusCondition(o.Previous.Conditions, ConditionDegraded)
	wasNotReady := deg != nil && deg.Status == metav1.ConditionTrue && deg.Reason == ReasonNotReady
	rd := o.Readiness
	switch {
	case o.Deleting:
		set(ConditionAvailable, false, ReasonDeleting, "Deleting the roles")
		set(ConditionProgressing, true, ReasonDeleting, "Deleting the roles")
		set(ConditionDegraded, false, ReasonDeleting, "Deleting the roles")
	case o.Failure != nil:
		if rd.Ready {
			set(ConditionAvailable, true, ReasonReady, "All components are ready.")
		} else {
			set(ConditionAvailable, false, o.Failure.Reason, o.Failure.Message)
		}
		set(ConditionProgressing, false, o.Failure.Reason, o.Failure.Message)
		set(ConditionDegraded, true, o.Failure.Reason, o.Failure.Message)
	case rd.Ready:
		set(ConditionAvailable, true, ReasonReady, "All components are ready.")
		set(ConditionProgressing, false, ReasonReady, "All components are ready.")
		set(ConditionDegraded, false, ReasonReady, "All components are ready.")
		r.ObservedVersion = o.Version
	case rd.Failing != "":
		set(ConditionAvailable, false, ReasonFailing, rd.Failing)
		set(ConditionProgressing, false, ReasonFailing, rd.Failing)
		set(ConditionDegraded, true, ReasonFailing, rd.Failing)
	case (wasAvailable || wasNotReady) && o.Previous.ObservedGeneration == o.Generation && !o.Changed:
		set(ConditionAvailable, false, ReasonNotReady, rd.Message)
		set(ConditionProgressing, true, ReasonNotReady, rd.Message)
		set(ConditionDegraded, true, ReasonNotReady, rd.Message)
	case o.Previous.ObservedVersion != "" || wasAvailable:
		set(ConditionAvailable, false, ReasonUpdating, rd.Message)
		set(ConditionProgressing, true, ReasonUpdating, rd.Message)
		set(ConditionDegraded, false, ReasonUpdating, rd.Message)
	default:
		msg := "Deploying version " + o.Version + ": " + rd.Message
		set(ConditionAvailable, false, ReasonDeploying, msg)
		set(ConditionProgressing, true, ReasonDeploying, msg)
		set(ConditionDegraded, false, ReasonDeploying, msg)
	}
	r.Conditions = conds
	switch {
	case o.Deleting:
		r.Phase = PhaseDeleting
	case r.ObservedVersion == o.Version:
		r.Phase = PhaseDeployed
	default:
		r.Phase = PhaseDeploying
	}
	return r
}

// ready reports whether r has Available=True.
func (r Report) ready() bool { return meta.IsStatusConditionTrue(r.Conditions, ConditionAvailable) }
