package schema_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/encoding/yaml"
)

// The CUE package is loaded once: building it takes most of the test time.
var (
	loadOnce  sync.Once
	cueCtx    *cue.Context
	schemaVal cue.Value
	loadErr   error
)

func schema(t *testing.T) (*cue.Context, cue.Value) {
	t.Helper()
	loadOnce.Do(func() {
		// The test runs in schema/; the CUE module root (cue.mod) is its parent.
		insts := load.Instances([]string{"./schema"}, &load.Config{Dir: ".."})
		if len(insts) != 1 {
			loadErr = errors.New("expected one CUE instance")
			return
		}
		if err := insts[0].Err; err != nil {
			loadErr = err
			return
		}
		cueCtx = cuecontext.New()
		schemaVal = cueCtx.BuildInstance(insts[0])
		if err := schemaVal.Err(); err != nil {
			loadErr = err
			return
		}
		// The package itself must be valid: every definition evaluates
		// without error on its own.
		loadErr = schemaVal.Validate()
	})
	if loadErr != nil {
		t.Fatalf("loading the schema package: %s", errors.Details(loadErr, nil))
	}
	return cueCtx, schemaVal
}

func definition(t *testing.T, name string) cue.Value {
	t.Helper()
	_, s := schema(t)
	d := s.LookupPath(cue.ParsePath(name))
	if err := d.Err(); err != nil {
		t.Fatalf("looking up %s: %v", name, err)
	}
	return d
}

// unifyYAML decodes a YAML document (keeping its positions) and unifies it
// with the named definition.
func unifyYAML(t *testing.T, def, filename string, data []byte) cue.Value {
	t.Helper()
	ctx, _ := schema(t)
	f, err := yaml.Extract(filename, data)
	if err != nil {
		t.Fatalf("parsing %s: %v", filename, err)
	}
	v := ctx.BuildFile(f)
	if err := v.Err(); err != nil {
		t.Fatalf("building %s: %v", filename, err)
	}
	// Data first, then the schema, as `cue vet -d` does: the messages then
	// read exactly like the command line's.
	return v.Unify(definition(t, def))
}

func unifyFile(t *testing.T, def, filename string) cue.Value {
	t.Helper()
	data, err := os.ReadFile(filename)
	if err != nil {
		t.Fatal(err)
	}
	return unifyYAML(t, def, filename, data)
}

func validate(v cue.Value) error {
	return v.Validate(cue.Concrete(true))
}

// lookup returns the Go value at a CUE path of a concrete value.
func lookup(t *testing.T, v cue.Value, path string) any {
	t.Helper()
	f := v.LookupPath(cue.ParsePath(path))
	if !f.Exists() {
		t.Fatalf("%s: does not exist", path)
	}
	var x any
	if err := f.Decode(&x); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return x
}

// want maps CUE paths to expected values; numbers are compared as JSON
// numbers decode (float64), lists as []any.
type want map[string]any

func checkValues(t *testing.T, v cue.Value, w want) {
	t.Helper()
	paths := make([]string, 0, len(w))
	for p := range w {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		got := lookup(t, v, p)
		exp := w[p]
		if i, ok := exp.(int); ok {
			exp = float64(i)
		}
		if g, ok := got.(int); ok {
			got = float64(g)
		}
		if !reflect.DeepEqual(normalize(got), normalize(exp)) {
			t.Errorf("%s = %#v, want %#v", p, got, exp)
		}
	}
}

// normalize turns a decoded value into its JSON form so that ints and floats,
// []string and []any compare equal.
func normalize(x any) any {
	b, err := json.Marshal(x)
	if err != nil {
		return x
	}
	var y any
	_ = json.Unmarshal(b, &y)
	return y
}

// upstreamDefaults are the defaults of the HCO CRD (main) for `spec: {}`.
var upstreamDefaults = want{
	"apiVersion":         "hco.kubevirt.io/v1beta1",
	"kind":               "HyperConverged",
	"metadata.name":      "kubevirt-hyperconverged",
	"metadata.namespace": "kubevirt-hyperconverged",

	"spec.certConfig.ca.duration":        "48h0m0s",
	"spec.certConfig.ca.renewBefore":     "24h0m0s",
	"spec.certConfig.server.duration":    "24h0m0s",
	"spec.certConfig.server.renewBefore": "12h0m0s",

	"spec.featureGates.downwardMetrics":            false,
	"spec.featureGates.deployKubeSecondaryDNS":     false,
	"spec.featureGates.alignCPUs":                  false,
	"spec.featureGates.decentralizedLiveMigration": true,
	"spec.featureGates.declarativeHotplugVolumes":  true,
	"spec.featureGates.objectGraph":                false,
	"spec.featureGates.incrementalBackup":          false,
	"spec.featureGates.containerPathVolumes":       false,

	"spec.liveMigrationConfig.parallelMigrationsPerCluster":      5,
	"spec.liveMigrationConfig.parallelOutboundMigrationsPerNode": 1,
	"spec.liveMigrationConfig.completionTimeoutPerGiB":           20,
	"spec.liveMigrationConfig.progressTimeout":                   150,
	"spec.liveMigrationConfig.allowAutoConverge":                 false,
	"spec.liveMigrationConfig.allowPostCopy":                     false,
	"spec.liveMigrationConfig.allowWorkloadDisruption":           false,

	"spec.resourceRequirements.vmiCPUAllocationRatio": 10,
	"spec.uninstallStrategy":                          "BlockUninstallIfWorkloadsExist",

	"spec.workloadUpdateStrategy.workloadUpdateMethods": []any{"LiveMigrate"},
	"spec.workloadUpdateStrategy.batchEvictionSize":     10,
	"spec.workloadUpdateStrategy.batchEvictionInterval": "1m0s",

	"spec.virtualMachineOptions.disableFreePageReporting": false,
	"spec.virtualMachineOptions.disableSerialConsoleLog":  false,

	"spec.higherWorkloadDensity.memoryOvercommitPercentage": 100,
	"spec.enableApplicationAwareQuota":                      false,
	"spec.enableCommonBootImageImport":                      true,
	"spec.deployVmConsoleProxy":                             false,
}

// defaultedSpecKeys are exactly the spec keys of `spec: {}` after defaulting:
// no validation helper may leak into the output.
var defaultedSpecKeys = []string{
	"certConfig", "deployVmConsoleProxy", "enableApplicationAwareQuota",
	"enableCommonBootImageImport", "featureGates", "higherWorkloadDensity",
	"liveMigrationConfig", "resourceRequirements", "uninstallStrategy",
	"virtualMachineOptions", "workloadUpdateStrategy",
}

func TestHyperConvergedValid(t *testing.T) {
	fullOverrides := want{
		"metadata.namespace":                                                    "openshift-cnv",
		"spec.certConfig.ca.duration":                                           "72h",
		"spec.certConfig.ca.renewBefore":                                        "24h",
		"spec.certConfig.server.duration":                                       "36h",
		"spec.certConfig.server.renewBefore":                                    "12h",
		"spec.deployVmConsoleProxy":                                             true,
		"spec.enableApplicationAwareQuota":                                      true,
		"spec.enableCommonBootImageImport":                                      false,
		"spec.featureGates.downwardMetrics":                                     true,
		"spec.workloadUpdateStrategy.batchEvictionSize":                         5,
		"spec.featureGates.decentralizedLiveMigration":                          false,
		"spec.featureGates.alignCPUs":                                           true,
		"spec.featureGates.persistentReservation":                               true,
		"spec.featureGates.declarativeHotplugVolumes":                           true,
		"spec.liveMigrationConfig.parallelMigrationsPerCluster":                 10,
		"spec.liveMigrationConfig.bandwidthPerMigration":                        "64Mi",
		"spec.liveMigrationConfig.completionTimeoutPerGiB":                      20,
		"spec.liveMigrationConfig.allowPostCopy":                                true,
		"spec.resourceRequirements.vmiCPUAllocationRatio":                       8,
		"spec.uninstallStrategy":                                                "RemoveWorkloads",
		"spec.workloadUpdateStrategy.workloadUpdateMethods":                     []any{"LiveMigrate", "Evict"},
		"spec.workloadUpdateStrategy.batchEvictionInterval":                     "2m",
		"spec.virtualMachineOptions.disableFreePageReporting":                   false,
		"spec.virtualMachineOptions.disableSerialConsoleLog":                    true,
		"spec.higherWorkloadDensity.memoryOvercommitPercentage":                 150,
		"spec.applicationAwareConfig.vmiCalcConfigName":                         "VirtualResources",
		"spec.applicationAwareConfig.allowApplicationAwareClusterResourceQuota": false,
		"spec.CommonInstancetypesDeployment.enabled":                            false,
		"spec.tlsSecurityProfile.custom.minTLSVersion":                          "VersionTLS12",
		"spec.kubeMacPoolConfiguration.rangeEnd":                                "02:FF:FF:FF:FF:FF",
		"spec.hypervisors":                                                      []any{map[string]any{"name": "kvm"}},
	}
	full := want{}
	for k, v := range upstreamDefaults {
		full[k] = v
	}
	for k, v := range fullOverrides {
		full[k] = v
	}

	tests := []struct {
		name string
		file string // under testdata/hyperconverged, or inline YAML below
		yaml string
		want want
		// specKeys, when set, is the exact key set of the exported spec.
		specKeys []string
	}{
		{name: "spec only", yaml: "spec: {}\n", want: upstreamDefaults, specKeys: defaultedSpecKeys},
		{name: "no spec", yaml: "metadata:\n  name: kubevirt-hyperconverged\n", want: upstreamDefaults, specKeys: defaultedSpecKeys},
		{name: "minimal", file: "minimal.yaml", want: upstreamDefaults, specKeys: defaultedSpecKeys},
		{name: "full", file: "full.yaml", want: full},
		{name: "live object with status", file: "live-with-status.yaml", want: want{
			"metadata.generation":                  3,
			"spec.evictionStrategy":                "LiveMigrate",
			"spec.ksmConfiguration":                map[string]any{},
			"spec.certConfig.ca.duration":          "48h0m0s",
			"status.conditions[0].type":            "ReconcileComplete",
			"status.systemHealthStatus":            "healthy",
			"status.infrastructureHighlyAvailable": true,
			"status.revision":                      "0123456789abcdef0123456789abcdef01234567",
		}},
		{
			name: "partial structs keep the other defaults",
			yaml: "spec:\n  certConfig:\n    ca:\n      renewBefore: 36h\n  liveMigrationConfig:\n    allowAutoConverge: true\n  featureGates:\n    incrementalBackup: true\n",
			want: want{
				"spec.certConfig.ca.duration":                     "48h0m0s",
				"spec.certConfig.ca.renewBefore":                  "36h",
				"spec.certConfig.server.duration":                 "24h0m0s",
				"spec.liveMigrationConfig.allowAutoConverge":      true,
				"spec.liveMigrationConfig.progressTimeout":        150,
				"spec.featureGates.incrementalBackup":             true,
				"spec.featureGates.decentralizedLiveMigration":    true,
				"spec.resourceRequirements.vmiCPUAllocationRatio": 10,
			},
		},
		{
			name: "applicationAwareConfig gets its field defaults when set",
			yaml: "spec:\n  applicationAwareConfig: {}\n",
			want: want{
				"spec.applicationAwareConfig.vmiCalcConfigName":                         "DedicatedVirtualResources",
				"spec.applicationAwareConfig.allowApplicationAwareClusterResourceQuota": false,
			},
		},
		{
			name: "tuning policy with its annotation",
			yaml: "metadata:\n  annotations:\n    hco.kubevirt.io/tuningPolicy: '{\"qps\": 50.5, \"burst\": 100}'\nspec:\n  tuningPolicy: annotation\n",
			want: want{"spec.tuningPolicy": "annotation"},
		},
		{
			name: "Old TLS profile and a disabled template without spec",
			yaml: "spec:\n  tlsSecurityProfile:\n    type: Old\n    old: {}\n  dataImportCronTemplates:\n  - metadata:\n      name: centos-stream9-image-cron\n      annotations:\n        dataimportcrontemplate.kubevirt.io/enable: 'false'\n",
			want: want{"spec.tlsSecurityProfile.type": "Old"},
		},
		{
			name: "TLS 1.3 custom profile without ciphers",
			yaml: "spec:\n  tlsSecurityProfile:\n    type: Custom\n    custom:\n      minTLSVersion: VersionTLS13\n",
			want: want{"spec.tlsSecurityProfile.custom.minTLSVersion": "VersionTLS13"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v cue.Value
			if tt.file != "" {
				v = unifyFile(t, "#HyperConverged", filepath.Join("testdata", "hyperconverged", tt.file))
			} else {
				v = unifyYAML(t, "#HyperConverged", tt.name+".yaml", []byte(tt.yaml))
			}
			if err := validate(v); err != nil {
				t.Fatalf("unexpected error:\n%s", errors.Details(err, nil))
			}
			checkValues(t, v, tt.want)
			if tt.specKeys != nil {
				b, err := v.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				var obj struct {
					Spec map[string]json.RawMessage `json:"spec"`
				}
				if err := json.Unmarshal(b, &obj); err != nil {
					t.Fatal(err)
				}
				got := make([]string, 0, len(obj.Spec))
				for k := range obj.Spec {
					got = append(got, k)
				}
				sort.Strings(got)
				if !slices.Equal(got, tt.specKeys) {
					t.Errorf("exported spec keys = %v, want %v", got, tt.specKeys)
				}
			}
		})
	}
}

// TestInvalid runs every testdata/<kind>/invalid/*.yaml. Each file starts
// with comments naming the expected error:
//
//	# path: spec.certConfig.ca
//	# error: duration (5m) must be at least 10m
//
// One line of the error details must start with "<path>: " and contain the
// phrase, exactly as `cue vet` prints it.
func TestInvalid(t *testing.T) {
	defs := map[string]string{
		"hyperconverged":      "#HyperConverged",
		"facts":               "#ClusterFacts",
		"hostpathprovisioner": "#HostPathProvisioner",
	}
	for dir, def := range defs {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "invalid", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no invalid cases for %s", dir)
		}
		for _, file := range files {
			t.Run(dir+"/"+strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				wantPath, wantErr := expectations(t, data)
				err = validate(unifyYAML(t, def, file, data))
				if err == nil {
					t.Fatalf("no error; want %s: %s", wantPath, wantErr)
				}
				details := errors.Details(err, nil)
				if !hasErrorLine(details, wantPath, wantErr) {
					t.Errorf("no error line %q starting with %q:\n%s", wantErr, wantPath+": ", details)
				}
			})
		}
	}
}

// hasErrorLine reports whether a line of details starts with "<path>: " and
// contains msg.
func hasErrorLine(details, path, msg string) bool {
	for _, line := range strings.Split(details, "\n") {
		if strings.HasPrefix(line, path+": ") && strings.Contains(line, msg) {
			return true
		}
	}
	return false
}

func expectations(t *testing.T, data []byte) (path, msg string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "# path: "); ok {
			path = p
		}
		if m, ok := strings.CutPrefix(line, "# error: "); ok {
			msg = m
		}
	}
	if path == "" || msg == "" {
		t.Fatal("missing '# path:' or '# error:' comment")
	}
	return path, msg
}

func TestClusterFacts(t *testing.T) {
	tests := []struct {
		name string
		file string
		yaml string
		want want
	}{
		{
			name: "defaults",
			yaml: "{}\n",
			want: want{
				"platform":                  "kubernetes",
				"controlPlaneNodes":         3,
				"workerNodes":               3,
				"controlPlaneArchitectures": []any{"amd64"},
				"workloadArchitectures":     []any{"amd64"},
			},
		},
		{
			name: "single node",
			yaml: "controlPlaneNodes: 1\nworkerNodes: 1\nworkloadArchitectures: [arm64]\n",
			want: want{
				"platform":                  "kubernetes",
				"controlPlaneNodes":         1,
				"workerNodes":               1,
				"controlPlaneArchitectures": []any{"amd64"},
				"workloadArchitectures":     []any{"arm64"},
			},
		},
		{
			name: "openshift",
			file: "openshift.yaml",
			want: want{
				"platform":              "openshift",
				"workerNodes":           1,
				"workloadArchitectures": []any{"amd64", "s390x"},
				"apiServerTLSSecurityProfile.custom.minTLSVersion": "VersionTLS12",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v cue.Value
			if tt.file != "" {
				v = unifyFile(t, "#ClusterFacts", filepath.Join("testdata", "facts", tt.file))
			} else {
				v = unifyYAML(t, "#ClusterFacts", tt.name+".yaml", []byte(tt.yaml))
			}
			if err := validate(v); err != nil {
				t.Fatalf("unexpected error:\n%s", errors.Details(err, nil))
			}
			checkValues(t, v, tt.want)
		})
	}
}

func TestHostPathProvisionerValid(t *testing.T) {
	tests := []struct {
		file string
		want want
	}{
		{file: "storagepools.yaml", want: want{
			"metadata.name":              "hostpath-provisioner",
			"spec.storagePools[1].name":  "pvc-backed",
			"spec.workload.nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
			"spec.imagePullPolicy":       "IfNotPresent",
		}},
		{file: "pathconfig.yaml", want: want{
			"apiVersion":           "hostpathprovisioner.kubevirt.io/v1beta1",
			"metadata.name":        "hostpath-provisioner",
			"spec.pathConfig.path": "/var/hpvolumes",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			v := unifyFile(t, "#HostPathProvisioner", filepath.Join("testdata", "hostpathprovisioner", tt.file))
			if err := validate(v); err != nil {
				t.Fatalf("unexpected error:\n%s", errors.Details(err, nil))
			}
			checkValues(t, v, tt.want)
		})
	}
}
