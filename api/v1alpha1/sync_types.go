package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations and finalizer of the API.
const (
	// ReconcileRequestAnnotation, set to any new value (the CLI uses an
	// RFC 3339 time), asks for a reconcile now; the controller copies the
	// value to status.lastHandledReconcileAt when it handled it (as Flux's
	// reconcile.fluxcd.io/requestedAt).
	ReconcileRequestAnnotation = "converge.dev/reconcile-requested-at"
	// Finalizer keeps a Sync until its deletionPolicy has been carried out.
	Finalizer = "converge.dev/finalizer"
)

// Condition types and reasons, kstatus-compatible: Ready is the summary;
// Reconciling is True while work is under way (abnormal-true); Stalled is
// True when the controller cannot make progress without a change to the
// Sync, its Secrets or the repository (abnormal-true).
const (
	ReadyCondition       = "Ready"
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
	// SourceVerifiedCondition is True when the revision's signature was
	// verified (only set when spec.source.verify is set).
	SourceVerifiedCondition = "SourceVerified"
	// HealthyCondition is True when every component of the graph is healthy.
	HealthyCondition = "Healthy"

	SucceededReason   = "ReconciliationSucceeded"
	ProgressingReason = "Progressing"
	FetchFailedReason = "FetchFailed"
	// AuthenticationFailedReason: the Git server refused the credentials
	// of spec.source.secretRef, its identity could not be verified (host
	// key not in known_hosts, certificate not signed by ca.crt), or the
	// Secret's credentials are incomplete (Flux source-controller's
	// AuthenticationFailed).
	AuthenticationFailedReason = "AuthenticationFailed"
	VerificationFailedReason   = "VerificationFailed"
	RenderFailedReason         = "RenderFailed"
	ApplyFailedReason          = "ApplyFailed"
	PruneFailedReason          = "PruneFailed"
	HealthCheckFailedReason    = "HealthCheckFailed"
	WaitingForHealthReason     = "WaitingForHealth"
	DependencyNotReadyReason   = "DependencyNotReady"
	SuspendedReason            = "Suspended"
	TargetFailedReason         = "TargetFailed"
	DeletionFailedReason       = "DeletionFailed"
	// AccessDeniedReason: the Sync names what the controller's lockdown
	// refuses (a local source, another namespace's Sync); Stalled until
	// the Sync changes.
	AccessDeniedReason = "AccessDenied"
	// ProgressingWithRetryReason is the Reconciling reason after a failure
	// a retry may fix (Flux's meta.ProgressingWithRetryReason).
	ProgressingWithRetryReason = "ProgressingWithRetry"
	// DriftCorrectedReason is the event reason of a reconcile that only
	// re-applied objects someone else changed or deleted.
	DriftCorrectedReason = "DriftCorrected"
	// UninstalledReason is the event reason of a deletionPolicy Delete that
	// deleted the Sync's objects.
	UninstalledReason = "Uninstalled"
)

// Deletion policies of spec.deletionPolicy.
const (
	// DeletionPolicyDelete deletes every object of the inventory (that
	// still carries converge's ownership labels and is not annotated
	// converge.dev/prune: disabled) when the Sync is deleted.
	DeletionPolicyDelete = "Delete"
	// DeletionPolicyOrphan leaves every object in the target cluster.
	DeletionPolicyOrphan = "Orphan"
)

// Sync drives the HyperConverged config at one path of one Git repository
// into one target cluster.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Sync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SyncSpec   `json:"spec"`
	Status SyncStatus `json:"status,omitempty"`
}

// SyncList is a list of Syncs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type SyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sync `json:"items"`
}

// SyncSpec is what to sync where. Defaults are the CRD's (schema/sync.cue).
type SyncSpec struct {
	// Source is the config repository.
	Source GitSource `json:"source"`
	// Target is the cluster to drive; nil means the controller's own.
	Target *Target `json:"target,omitempty"`
	// ServiceAccountName, when set, is impersonated for every request to
	// the target (system:serviceaccount:<the Sync's namespace>:<name>).
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Interval is how often the source is fetched and the graph
	// reconciled, as a Go duration ("5m"). Default 5m.
	Interval metav1.Duration `json:"interval,omitempty"`
	// Timeout bounds one reconcile: fetch, render, apply and health gates.
	// Default 5m.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// RetryInterval is how long to wait before retrying after an error a
	// retry may fix (fetch, authentication, apply), as a Go duration, as
	// Flux's spec.retryInterval. Default: the controller's (10s). A change
	// to a Secret the Sync names retries at once.
	RetryInterval *metav1.Duration `json:"retryInterval,omitempty"`
	// Suspend stops reconciling (and drift correction) until set false.
	Suspend bool `json:"suspend,omitempty"`
	// Prune deletes objects that left the config. Default true.
	Prune *bool `json:"prune,omitempty"`
	// Wait, as Flux's Kustomization spec.wait (default true), applies a
	// component only once the components it depends on are healthy and
	// makes the Sync Ready only once every component is. False applies
	// every stage in order without waiting for health and makes the Sync
	// Ready once applied; status.components and the Healthy condition
	// still report each component's health.
	Wait *bool `json:"wait,omitempty"`
	// DeletionPolicy is what happens to the applied objects when the Sync
	// is deleted: Delete (default) or Orphan.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// Receiver, when set, lets a Git push webhook trigger a reconcile at
	// once: POST status.webhookPath (/hook/<sha256 of token, name and
	// namespace>, as Flux's Receiver) on the controller's receiver
	// address, authenticated with the token in the Secret.
	Receiver *Receiver `json:"receiver,omitempty"`
	// DependsOn lists Syncs that must be Ready (at their latest revision)
	// before this one is reconciled. Namespace defaults to the Sync's.
	DependsOn []SyncReference `json:"dependsOn,omitempty"`
	// Operators selects who runs the operand CRs the config derives:
	// OperatorsNative (converge-controller's operators) or
	// OperatorsExternal (the upstream operators). Empty: the
	// HyperConverged's converge.dev/operators annotation decides, default
	// native. When both are set they must agree.
	Operators string `json:"operators,omitempty"`
}

// Operators modes of spec.operators (and of the HyperConverged annotation
// converge.dev/operators).
const (
	// OperatorsNative: converge-controller holds one operator per operand
	// CR kind and runs each CR's roles.
	OperatorsNative = "native"
	// OperatorsExternal: the upstream operators run the operand CRs;
	// converge only derives them, as HCO does.
	OperatorsExternal = "external"
)

// GitSource is a Git repository, a ref in it and the directory of the
// config.
type GitSource struct {
	// URL is an https://, http://, ssh:// (or scp-like user@host:path) or
	// file:// URL.
	URL string `json:"url"`
	// Ref selects the revision; empty follows the default branch.
	Ref *GitRef `json:"ref,omitempty"`
	// Path is the directory of the config in the repository. Default ".".
	Path string `json:"path,omitempty"`
	// SecretRef names a Secret in the Sync's namespace with credentials,
	// in Flux's keys: username+password (HTTPS basic), bearerToken
	// (HTTPS), identity (+ optional password) and known_hosts (SSH,
	// known_hosts required), ca.crt (HTTPS custom CA).
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Verify, when set, refuses revisions whose signature does not verify.
	Verify *Verification `json:"verify,omitempty"`
	// Timeout bounds each Git network operation. Default 60s.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// GitRef selects a revision. At most one field is set.
type GitRef struct {
	Branch string `json:"branch,omitempty"`
	Tag    string `json:"tag,omitempty"`
	// SemVer is a range ("^1.2", ">=1.0.0 <2.0.0"): the highest tag that
	// satisfies it.
	SemVer string `json:"semver,omitempty"`
	// Commit is a full 40-hex-digit SHA-1.
	Commit string `json:"commit,omitempty"`
}

// Verification is the commit signature check.
type Verification struct {
	// Mode is HEAD (the commit), Tag (the annotated tag) or TagAndHEAD.
	// Default HEAD.
	Mode string `json:"mode,omitempty"`
	// SecretRef names a Secret whose keys ending in .asc hold armored
	// OpenPGP public keys and whose keys ending in .pub hold SSH public
	// keys (authorized_keys lines).
	SecretRef LocalObjectReference `json:"secretRef"`
}

// Receiver authenticates push webhooks for one Sync.
type Receiver struct {
	// SecretRef names a Secret in the Sync's namespace whose key "token"
	// is the shared secret: the HMAC key of GitHub's X-Hub-Signature-256
	// and of the generic X-Signature header, or GitLab's X-Gitlab-Token.
	SecretRef LocalObjectReference `json:"secretRef"`
}

// Target is a remote cluster.
type Target struct {
	// KubeConfig reads a kubeconfig from a Secret in the Sync's namespace.
	KubeConfig KubeConfigReference `json:"kubeConfig"`
}

// KubeConfigReference names a kubeconfig in a Secret.
type KubeConfigReference struct {
	SecretRef LocalObjectReference `json:"secretRef"`
	// Key of the kubeconfig in the Secret. Default "value" (as Flux).
	Key string `json:"key,omitempty"`
}

// LocalObjectReference names an object in the Sync's namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// SyncReference names a Sync.
type SyncReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// SyncStatus is what the controller observed and did.
type SyncStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// LastAttemptedRevision is the revision of the last reconcile attempt,
	// as "<branch|tag>@sha1:<commit>".
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastAppliedRevision is the last revision applied without error.
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
	// LastHandledReconcileAt is the last converge.dev/reconcile-requested-at
	// value handled.
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// Inventory is the set of objects applied in the target.
	Inventory *Inventory `json:"inventory,omitempty"`
	// Components is each graph component's health, in graph order.
	Components []ComponentStatus `json:"components,omitempty"`
	// History holds the last 5 revisions reconciled, newest first.
	History []Snapshot `json:"history,omitempty"`
	// WebhookPath is the URL path of the Sync's push receiver,
	// "/hook/<hex sha256 of token+name+namespace>" (Flux's Receiver
	// status.webhookPath), set while spec.receiver has a usable token.
	WebhookPath string `json:"webhookPath,omitempty"`
}

// Inventory is the applied set: the one inventory type of converge, kept
// in a Sync's status.inventory and, by `converge apply`, in a ConfigMap;
// package reconciler/inventory holds the functions on it (IDs, digests,
// the stale entries to prune).
type Inventory struct {
	Entries []InventoryEntry `json:"entries"`
}

// InventoryEntry is one applied object.
type InventoryEntry struct {
	// ID is "<namespace>_<name>_<group>_<kind>".
	ID string `json:"id"`
	// Version is the API version it was applied with.
	Version string `json:"v"`
	// Digest is the sha256 of the desired object as applied.
	Digest string `json:"d,omitempty"`
	// ResourceVersion is its resourceVersion after converge's last write.
	ResourceVersion string `json:"rv,omitempty"`
	// Component is the graph node that derives the object ("crds" for the
	// generated CRDs), for `converge tree`.
	Component string `json:"c,omitempty"`
}

// ComponentStatus is one graph component's health.
type ComponentStatus struct {
	Name string `json:"name"`
	// Health is Healthy, Progressing, Waiting (its dependencies are not
	// healthy yet, so it was not applied), or Failed.
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
}

// Snapshot is one reconciled revision.
type Snapshot struct {
	Revision string `json:"revision"`
	// Digest is "sha256:<hex>" of the rendered objects.
	Digest          string      `json:"digest"`
	FirstReconciled metav1.Time `json:"firstReconciled"`
	LastReconciled  metav1.Time `json:"lastReconciled"`
	// LastReconciledDuration is how long the last reconcile of it took.
	LastReconciledDuration metav1.Duration `json:"lastReconciledDuration"`
	// LastReconciledStatus is the Ready reason of that reconcile.
	LastReconciledStatus string `json:"lastReconciledStatus"`
	TotalReconciliations int64  `json:"totalReconciliations"`
}

// GetConditions returns the status conditions.
func (s *Sync) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the status conditions.
func (s *Sync) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// PruneEnabled reports spec.prune (default true).
func (s *Sync) PruneEnabled() bool { return s.Spec.Prune == nil || *s.Spec.Prune }

// WaitEnabled reports spec.wait (default true).
func (s *Sync) WaitEnabled() bool { return s.Spec.Wait == nil || *s.Spec.Wait }
