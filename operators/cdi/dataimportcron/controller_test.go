package dataimportcron_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/cdi/dataimportcron"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
)

// env is a real API server with the DataVolume, DataSource and
// DataImportCron CRDs the graph generates, converge's DataVolume and
// DataImportCron controllers in one manager, a StorageClass with
// immediate binding (no provisioner: PVCs stay Pending) and a registry
// (go-containerregistry's pkg/registry) on loopback.
type env struct {
	t    *testing.T
	c    client.Client
	host string
}

func newEnv(t *testing.T) *env {
	controlplane.RequireForTest(t)
	ctrl.SetLogger(zap.New(zap.WriteTo(testWriter{t})))
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	crdtest.Install(t, c, "datavolumes", "datasources", "dataimportcrons")
	dvo := datavolume.DefaultOptions()
	dvo.CRDPoll, dvo.SkipNameValidation = 100*time.Millisecond, true
	o := dataimportcron.DefaultOptions()
	o.CRDPoll, o.SkipNameValidation, o.RetryAfter = 100*time.Millisecond, true, time.Second
	controlplane.RunManagerForTest(t, cp, scheme,
		func(mgr ctrl.Manager) error { return datavolume.Setup(mgr, dvo) },
		func(mgr ctrl.Manager) error { return dataimportcron.Setup(mgr, o) })
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	immediate := storagev1.VolumeBindingImmediate
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, Provisioner: "x", VolumeBindingMode: &immediate}))
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "golden"}}))
	return &env{t: t, c: c, host: strings.TrimPrefix(srv.URL, "http://")}
}

// push writes a new random image to repoTag and gives its digest.
func (e *env) push(repoTag string) string {
	e.t.Helper()
	img, err := random.Image(512, 1)
	must(e.t, err)
	ref, err := name.ParseReference(e.host+"/"+repoTag, name.Insecure)
	must(e.t, err)
	must(e.t, remote.Write(ref, img))
	d, err := img.Digest()
	must(e.t, err)
	return d.String()
}

// cron creates a DataImportCron polling docker://<registry>/<repoTag>
// every second (an ordinary schedule: robfig/cron's @every descriptor).
func (e *env) cron(name, dataSource, repoTag string, keep *int32, policy *cdiv1.DataImportCronRetentionPolicy) {
	e.t.Helper()
	url, class := "docker://"+e.host+"/"+repoTag, "now"
	must(e.t, e.c.Create(context.Background(), &cdiv1.DataImportCron{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "golden"},
		Spec: cdiv1.DataImportCronSpec{
			Schedule: "@every 1s", ManagedDataSource: dataSource, ImportsToKeep: keep, RetentionPolicy: policy,
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{
				Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}},
				Storage: &cdiv1.StorageSpec{StorageClassName: &class,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}))
}

// imported waits for the cron's import of digest: its DataVolume, named
// as CDI names it, pinned to the digest and labelled for the cron, then
// plays the node agent (which needs root and the hostpath CSI driver, so
// not in this test): the DataVolume's phase becomes Succeeded. It gives
// the DataVolume's name.
func (e *env) imported(cron, dataSource, repo, digest string) string {
	e.t.Helper()
	ctx := context.Background()
	want, err := dataimportcron.DataVolumeName(dataSource, digest)
	must(e.t, err)
	dv := &cdiv1.DataVolume{}
	controlplane.Eventually(e.t, 30*time.Second, func() bool {
		return e.c.Get(ctx, types.NamespacedName{Namespace: "golden", Name: want}, dv) == nil && dv.Status.Phase != ""
	})
	if got := *dv.Spec.Source.Registry.URL; got != "docker://"+e.host+"/"+repo+"@"+digest {
		e.t.Errorf("DataVolume %s imports %s, want the tag pinned to %s", want, got, digest)
	}
	if dv.Labels[dataimportcron.LabelCron] != cron || dv.Annotations[dataimportcron.AnnImmediateBinding] != "true" {
		e.t.Errorf("DataVolume %s: labels %v annotations %v", want, dv.Labels, dv.Annotations)
	}
	// The DataVolume is created before the cron's status is written.
	controlplane.Eventually(e.t, 10*time.Second, func() bool {
		c := e.getCron(cron).Status.CurrentImports
		return len(c) == 1 && c[0].DataVolumeName == want && c[0].Digest == digest
	})
	controlplane.Eventually(e.t, 30*time.Second, func() bool {
		if e.c.Get(ctx, types.NamespacedName{Namespace: "golden", Name: want}, dv) != nil {
			return false
		}
		dv.Status.Phase = cdiv1.Succeeded
		return e.c.Status().Update(ctx, dv) == nil
	})
	return want
}

func (e *env) getCron(name string) *cdiv1.DataImportCron {
	e.t.Helper()
	c := &cdiv1.DataImportCron{}
	must(e.t, e.c.Get(context.Background(), types.NamespacedName{Namespace: "golden", Name: name}, c))
	return c
}

// upToDate waits until the cron is UpToDate with lastImportedPVC dv and
// the DataSource points at dv.
func (e *env) upToDate(cron, dataSource, dv string) {
	e.t.Helper()
	ctx := context.Background()
	ds := &cdiv1.DataSource{}
	defer func() {
		if e.t.Failed() {
			e.t.Logf("cron %+v\nDataSource %+v", e.getCron(cron), ds)
		}
	}()
	controlplane.Eventually(e.t, 30*time.Second, func() bool {
		c := e.getCron(cron)
		u := dataimportcron.FindCondition(c, cdiv1.DataImportCronUpToDate)
		return u != nil && u.Status == corev1.ConditionTrue && c.Status.LastImportedPVC != nil && c.Status.LastImportedPVC.Name == dv &&
			e.c.Get(ctx, types.NamespacedName{Namespace: "golden", Name: dataSource}, ds) == nil &&
			ds.Spec.Source.PVC != nil && ds.Spec.Source.PVC.Name == dv
	})
	c := e.getCron(cron)
	u := dataimportcron.FindCondition(c, cdiv1.DataImportCronUpToDate)
	p := dataimportcron.FindCondition(c, cdiv1.DataImportCronProgressing)
	if u.Reason != dataimportcron.ReasonUpToDate || u.Message != "Latest import is up to date" || p == nil || p.Status != corev1.ConditionFalse || p.Reason != dataimportcron.ReasonNoImport {
		e.t.Errorf("conditions %+v, want CDI's UpToDate=True UpToDate and Progressing=False NoImport", c.Status.Conditions)
	}
	if c.Status.SourceFormat == nil || *c.Status.SourceFormat != cdiv1.DataImportCronSourceFormatPvc || c.Status.LastExecutionTimestamp == nil || c.Status.LastImportTimestamp == nil {
		e.t.Errorf("status %+v: want sourceFormat pvc and the timestamps", c.Status)
	}
	if ds.Labels[dataimportcron.LabelCron] != cron || ds.Spec.Source.PVC.Namespace != "golden" {
		e.t.Errorf("DataSource %+v, want labelled for %s, source golden/%s", ds.ObjectMeta, cron, dv)
	}
}

// labelled gives the names of the objects of list labelled for cron,
// PVCs being deleted left out.
func (e *env) labelled(cron string, list client.ObjectList) []string {
	e.t.Helper()
	must(e.t, e.c.List(context.Background(), list, client.InNamespace("golden"), client.MatchingLabels{dataimportcron.LabelCron: cron}))
	var names []string
	switch l := list.(type) {
	case *cdiv1.DataVolumeList:
		for _, i := range l.Items {
			names = append(names, i.Name)
		}
	case *corev1.PersistentVolumeClaimList:
		// No kube-controller-manager here: its pvc-protection controller
		// would remove the finalizer of a deleted PVC no pod uses.
		for _, i := range l.Items {
			if i.DeletionTimestamp == nil {
				names = append(names, i.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestDataImportCron: a cron polling a registry on loopback imports its
// tag's digest, points its DataSource at it, imports again when an image
// is pushed to the same tag (the DataSource moves), and keeps only
// importsToKeep imports (DataVolumes and PVCs).
func TestDataImportCron(t *testing.T) {
	e := newEnv(t)
	keep := int32(2)
	d1 := e.push("disks/fedora:latest")
	e.cron("fedora-cron", "fedora", "disks/fedora:latest", &keep, nil)

	dv1 := e.imported("fedora-cron", "fedora", "disks/fedora", d1)
	e.upToDate("fedora-cron", "fedora", dv1)

	var dvs []string
	dvs = append(dvs, dv1)
	for i := range 2 {
		start := time.Now()
		d := e.push("disks/fedora:latest")
		dv := e.imported("fedora-cron", "fedora", "disks/fedora", d)
		seen := time.Since(start)
		e.upToDate("fedora-cron", "fedora", dv)
		dvs = append(dvs, dv)
		t.Logf("import %d: %s created %v after the push (schedule @every 1s), DataSource moved %v after it", i+2, dv, seen.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	want := slices.Sorted(slices.Values(dvs[1:]))
	var got []string
	controlplane.Eventually(t, 30*time.Second, func() bool {
		got = e.labelled("fedora-cron", &cdiv1.DataVolumeList{})
		return slices.Equal(got, want) && slices.Equal(e.labelled("fedora-cron", &corev1.PersistentVolumeClaimList{}), want)
	})
	// The schedule keeps polling; the same digest imports nothing new.
	last := e.getCron("fedora-cron").Status.LastExecutionTimestamp
	time.Sleep(2500 * time.Millisecond)
	c := e.getCron("fedora-cron")
	if !c.Status.LastExecutionTimestamp.After(last.Time) {
		t.Errorf("lastExecutionTimestamp %v did not move past %v in 2.5 s of a 1 s schedule", c.Status.LastExecutionTimestamp, last)
	}
	if got := e.labelled("fedora-cron", &cdiv1.DataVolumeList{}); !slices.Equal(got, want) {
		t.Errorf("DataVolumes %v after polls of an unchanged tag, want %v", got, want)
	}
}

// TestPollFailure: a registry that cannot be reached is a Warning event
// DigestPollFailed naming it, no import, and UpToDate=False NoDigest.
func TestPollFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.host = "127.0.0.1:1"
	e.cron("down", "down", "disks/none:1", nil, nil)
	var ev corev1.Event
	controlplane.Eventually(t, 30*time.Second, func() bool {
		list := &corev1.EventList{}
		must(t, e.c.List(ctx, list, client.InNamespace("golden")))
		for _, i := range list.Items {
			if i.InvolvedObject.Name == "down" && i.Reason == "DigestPollFailed" {
				ev = i
				return true
			}
		}
		return false
	})
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "127.0.0.1:1/disks/none:1") {
		t.Errorf("event %s %q, want a Warning naming the image", ev.Type, ev.Message)
	}
	controlplane.Eventually(t, 10*time.Second, func() bool {
		u := dataimportcron.FindCondition(e.getCron("down"), cdiv1.DataImportCronUpToDate)
		return u != nil && u.Status == corev1.ConditionFalse && u.Reason == dataimportcron.ReasonNoDigest
	})
	if got := e.labelled("down", &cdiv1.DataVolumeList{}); len(got) != 0 {
		t.Errorf("DataVolumes %v of an unreachable registry", got)
	}
}

// TestRetentionNone: a cron with retentionPolicy None takes its
// DataVolumes, PVCs and DataSource with it when deleted; a DataSource
// another cron manages is left alone.
func TestRetentionNone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	none := cdiv1.DataImportCronRetainNone
	d := e.push("disks/cirros:1")
	e.cron("cirros-cron", "cirros", "disks/cirros:1", nil, &none)
	dv := e.imported("cirros-cron", "cirros", "disks/cirros", d)
	e.upToDate("cirros-cron", "cirros", dv)

	// A second cron naming the same DataSource does not take it over.
	e.cron("rival", "cirros", "disks/cirros:1", nil, nil)
	time.Sleep(2 * time.Second)
	if got := e.labelled("rival", &cdiv1.DataVolumeList{}); len(got) != 0 {
		t.Errorf("the rival cron imported %v into a DataSource another cron manages", got)
	}
	must(t, e.c.Delete(ctx, e.getCron("rival")))

	must(t, e.c.Delete(ctx, e.getCron("cirros-cron")))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := e.c.Get(ctx, types.NamespacedName{Namespace: "golden", Name: "cirros"}, &cdiv1.DataSource{})
		return apierrors.IsNotFound(err) && len(e.labelled("cirros-cron", &cdiv1.DataVolumeList{})) == 0 &&
			len(e.labelled("cirros-cron", &corev1.PersistentVolumeClaimList{})) == 0
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testWriter logs the controllers' lines in the test's output.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
