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
	"strconv"
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
		`metadata.annotations."converge.dev/operators"`:                         "external",
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

	tests := []validCase{
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
	runValidCases(t, filepath.Join("testdata", "hyperconverged"), tests)
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
		"hyperconverged-v1":   "#HyperConverged",
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

// upstreamDefaultsV1 are the defaults of the HCO CRD (main) for a v1 `spec: {}`.
var upstreamDefaultsV1 = want{
	"apiVersion":         "hco.kubevirt.io/v1",
	"kind":               "HyperConverged",
	"metadata.name":      "kubevirt-hyperconverged",
	"metadata.namespace": "kubevirt-hyperconverged",

	"spec.virtualization.liveMigrationConfig.parallelMigrationsPerCluster":      5,
	"spec.virtualization.liveMigrationConfig.parallelOutboundMigrationsPerNode": 1,
	"spec.virtualization.liveMigrationConfig.completionTimeoutPerGiB":           20,
	"spec.virtualization.liveMigrationConfig.progressTimeout":                   150,
	"spec.virtualization.liveMigrationConfig.allowAutoConverge":                 false,
	"spec.virtualization.liveMigrationConfig.allowPostCopy":                     false,
	"spec.virtualization.liveMigrationConfig.allowWorkloadDisruption":           false,
	"spec.virtualization.workloadUpdateStrategy.workloadUpdateMethods":          []any{"LiveMigrate"},
	"spec.virtualization.workloadUpdateStrategy.batchEvictionSize":              10,
	"spec.virtualization.workloadUpdateStrategy.batchEvictionInterval":          "1m0s",
	"spec.virtualization.virtualMachineOptions.disableFreePageReporting":        false,
	"spec.virtualization.virtualMachineOptions.disableSerialConsoleLog":         false,
	"spec.virtualization.higherWorkloadDensity.memoryOvercommitPercentage":      100,
	"spec.virtualization.vmiCPUAllocationRatio":                                 10,

	"spec.workloadSources.enableCommonBootImageImport": true,

	"spec.security.certConfig.ca.duration":        "48h0m0s",
	"spec.security.certConfig.ca.renewBefore":     "24h0m0s",
	"spec.security.certConfig.server.duration":    "24h0m0s",
	"spec.security.certConfig.server.renewBefore": "12h0m0s",

	"spec.deployment.uninstallStrategy":                                                "BlockUninstallIfWorkloadsExist",
	"spec.deployment.deployVmConsoleProxy":                                             false,
	"spec.deployment.deployNetworkResourcesInjector":                                   true,
	"spec.deployment.applicationAwareConfig.enable":                                    false,
	"spec.deployment.applicationAwareConfig.vmiCalcConfigName":                         "DedicatedVirtualResources",
	"spec.deployment.applicationAwareConfig.allowApplicationAwareClusterResourceQuota": false,
}

// defaultedSpecKeysV1 are exactly the spec keys of a v1 `spec: {}` after
// defaulting: the optional groups (featureGates, storage, networking,
// observability) stay absent.
var defaultedSpecKeysV1 = []string{"deployment", "security", "virtualization", "workloadSources"}

// specKeys returns the sorted keys of the exported spec of v.
// validCase is a HyperConverged of either version that must validate.
type validCase struct {
	name string
	file string // under the directory runValidCases gets, or inline YAML below
	yaml string
	want want
	// specKeys, when set, is the exact key set of the exported spec.
	specKeys []string
}

// runValidCases validates each case against #HyperConverged (file cases
// read from dir) and checks its values and, when given, its spec keys.
func runValidCases(t *testing.T, dir string, tests []validCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v cue.Value
			if tt.file != "" {
				v = unifyFile(t, "#HyperConverged", filepath.Join(dir, tt.file))
			} else {
				v = unifyYAML(t, "#HyperConverged", tt.name+".yaml", []byte(tt.yaml))
			}
			if err := validate(v); err != nil {
				t.Fatalf("unexpected error:\n%s", errors.Details(err, nil))
			}
			checkValues(t, v, tt.want)
			if tt.specKeys != nil {
				if got := specKeys(t, v); !slices.Equal(got, tt.specKeys) {
					t.Errorf("exported spec keys = %v, want %v", got, tt.specKeys)
				}
			}
		})
	}
}

func specKeys(t *testing.T, v cue.Value) []string {
	t.Helper()
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
	return got
}

func TestHyperConvergedV1Valid(t *testing.T) {
	full := want{}
	for k, v := range upstreamDefaultsV1 {
		full[k] = v
	}
	for k, v := range (want{
		"spec.featureGates[0].name":                                                        "downwardMetrics",
		"spec.featureGates[3].state":                                                       "Disabled",
		"spec.virtualization.tuningPolicy":                                                 "annotation",
		"spec.virtualization.liveMigrationConfig.parallelMigrationsPerCluster":             10,
		"spec.virtualization.liveMigrationConfig.parallelOutboundMigrationsPerNode":        2,
		"spec.virtualization.liveMigrationConfig.bandwidthPerMigration":                    "64Mi",
		"spec.virtualization.liveMigrationConfig.completionTimeoutPerGiB":                  150,
		"spec.virtualization.liveMigrationConfig.progressTimeout":                          300,
		"spec.virtualization.liveMigrationConfig.allowAutoConverge":                        true,
		"spec.virtualization.liveMigrationConfig.allowPostCopy":                            true,
		"spec.virtualization.liveMigrationConfig.allowWorkloadDisruption":                  true,
		"spec.virtualization.permittedHostDevices.pciHostDevices[1].disabled":              true,
		"spec.virtualization.mediatedDevicesConfiguration.enabled":                         true,
		"spec.virtualization.workloadUpdateStrategy.workloadUpdateMethods":                 []any{"LiveMigrate", "Evict"},
		"spec.virtualization.workloadUpdateStrategy.batchEvictionSize":                     5,
		"spec.virtualization.workloadUpdateStrategy.batchEvictionInterval":                 "2m",
		"spec.virtualization.obsoleteCPUModels":                                            []any{"486", "pentium"},
		"spec.virtualization.evictionStrategy":                                             "LiveMigrateIfPossible",
		"spec.virtualization.virtualMachineOptions.disableFreePageReporting":               true,
		"spec.virtualization.virtualMachineOptions.disableSerialConsoleLog":                true,
		"spec.virtualization.virtualMachineOptions.defaultCPUModel":                        "Haswell",
		"spec.virtualization.virtualMachineOptions.defaultRuntimeClass":                    "kata",
		"spec.virtualization.higherWorkloadDensity.memoryOvercommitPercentage":             150,
		"spec.virtualization.liveUpdateConfiguration.maxGuest":                             "64Gi",
		"spec.virtualization.hypervisors":                                                  []any{map[string]any{"name": "kvm"}},
		"spec.virtualization.roleAggregationStrategy":                                      "Manual",
		"spec.virtualization.vmiCPUAllocationRatio":                                        8,
		"spec.storage.vmStateStorageClass":                                                 "rwx-fs",
		"spec.storage.workloadResourceRequirements.limits.cpu":                             "500m",
		"spec.storage.persistentReservationConfiguration.enabled":                          true,
		"spec.networking.kubeSecondaryDNSNameServerIP":                                     "192.168.1.53",
		"spec.networking.kubeMacPoolConfiguration.rangeEnd":                                "02:FF:FF:FF:FF:FF",
		"spec.networking.networkBinding.passt.migration.method":                            "link-refresh",
		"spec.workloadSources.enableCommonBootImageImport":                                 false,
		"spec.workloadSources.enableMultiArchBootImageImport":                              true,
		"spec.workloadSources.dataImportCronTemplates[1].metadata.name":                    "centos-stream9-image-cron",
		"spec.workloadSources.commonInstancetypesDeployment.enabled":                       false,
		"spec.security.certConfig.ca.duration":                                             "72h",
		"spec.security.certConfig.ca.renewBefore":                                          "24h",
		"spec.security.certConfig.server.duration":                                         "36h",
		"spec.security.certConfig.server.renewBefore":                                      "12h",
		"spec.security.tlsSecurityProfile.custom.minTLSVersion":                            "VersionTLS12",
		"spec.deployment.nodePlacements.infra.nodeSelector":                                map[string]any{"node-role.kubernetes.io/infra": ""},
		"spec.deployment.uninstallStrategy":                                                "RemoveWorkloads",
		"spec.deployment.logVerbosityConfig.cdi":                                           3,
		"spec.deployment.applicationAwareConfig.enable":                                    true,
		"spec.deployment.applicationAwareConfig.vmiCalcConfigName":                         "VirtualResources",
		"spec.deployment.applicationAwareConfig.allowApplicationAwareClusterResourceQuota": true,
		"spec.deployment.deployVmConsoleProxy":                                             true,
		"spec.deployment.deployNetworkResourcesInjector":                                   false,
		"spec.observability.workloads.allowedMetrics[1]":                                   "kubevirt_vmi_cpu_usage_seconds_total",
		"spec.observability.allowedAlerts":                                                 []any{"none"},
		"spec.observability.allowedRecordingRules":                                         []any{"kubevirt_vmi_phase_count:sum"},
	}) {
		full[k] = v
	}

	tests := []validCase{
		{name: "minimal", file: "minimal.yaml", want: upstreamDefaultsV1, specKeys: defaultedSpecKeysV1},
		{name: "no spec", yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\n", want: upstreamDefaultsV1, specKeys: defaultedSpecKeysV1},
		{name: "full", file: "full.yaml", want: full, specKeys: []string{
			"deployment", "featureGates", "networking", "observability", "security", "storage", "virtualization", "workloadSources",
		}},
		{name: "openshift", file: "openshift.yaml", want: want{
			"metadata.namespace":                                       "openshift-cnv",
			"spec.featureGates[1].name":                                "disableMDevConfiguration",
			"spec.virtualization.liveMigrationConfig.network":          "openshift-cnv/migration-network",
			"spec.virtualization.liveMigrationConfig.progressTimeout":  150,
			"spec.virtualization.ksmConfiguration":                     map[string]any{},
			"spec.security.tlsSecurityProfile.type":                    "Old",
			"spec.security.certConfig.ca.duration":                     "48h0m0s",
			"spec.deployment.nodePlacements.workload.nodeSelector":     map[string]any{"node-role.kubernetes.io/worker": "", "cpumanager": "true"},
			"spec.deployment.applicationAwareConfig.enable":            true,
			"spec.deployment.applicationAwareConfig.vmiCalcConfigName": "DedicatedVirtualResources",
			"spec.deployment.deployNetworkResourcesInjector":           true,
		}},
		{
			name: "partial groups keep the other defaults",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  virtualization:\n    liveMigrationConfig:\n      allowPostCopy: true\n  security:\n    certConfig:\n      server:\n        duration: 36h\n  deployment:\n    applicationAwareConfig:\n      vmiCalcConfigName: VmiPodUsage\n",
			want: want{
				"spec.virtualization.liveMigrationConfig.allowPostCopy":    true,
				"spec.virtualization.liveMigrationConfig.progressTimeout":  150,
				"spec.virtualization.vmiCPUAllocationRatio":                10,
				"spec.security.certConfig.server.duration":                 "36h",
				"spec.security.certConfig.server.renewBefore":              "12h0m0s",
				"spec.security.certConfig.ca.duration":                     "48h0m0s",
				"spec.deployment.applicationAwareConfig.enable":            false,
				"spec.deployment.applicationAwareConfig.vmiCalcConfigName": "VmiPodUsage",
				"spec.deployment.uninstallStrategy":                        "BlockUninstallIfWorkloadsExist",
			},
		},
		{
			name: "mediated devices enabled alone (no CEL type rule in v1)",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  virtualization:\n    mediatedDevicesConfiguration:\n      enabled: false\n",
			want: want{"spec.virtualization.mediatedDevicesConfiguration": map[string]any{"enabled": false}},
		},
		{
			name: "highBurst is accepted (HCO warns and removes it)",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  virtualization:\n    tuningPolicy: highBurst\n",
			want: want{"spec.virtualization.tuningPolicy": "highBurst"},
		},
		{
			name: "unknown and discontinued gates are accepted",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  featureGates:\n    - name: nonRoot\n    - name: noSuchGate\n      state: Disabled\n",
			want: want{"spec.featureGates[1].name": "noSuchGate"},
		},
		{
			name: "deprecated gates agreeing with their fields",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  featureGates:\n    - name: disableMDevConfiguration\n    - name: PersistentReservation\n      state: Disabled\n    - name: enableMultiArchBootImageImport\n  virtualization:\n    mediatedDevicesConfiguration:\n      enabled: false\n  storage:\n    persistentReservationConfiguration:\n      enabled: false\n  workloadSources:\n    enableMultiArchBootImageImport: true\n",
			want: want{"spec.storage.persistentReservationConfiguration.enabled": false},
		},
		{
			name: "64 feature gates",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  featureGates:\n" + gateList(64),
			want: want{"spec.featureGates[63].name": "gate63"},
		},
	}
	runValidCases(t, filepath.Join("testdata", "hyperconverged-v1"), tests)
}

func gateList(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("    - name: gate")
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\n")
	}
	return b.String()
}

// toV1 runs #ToV1 on the YAML document data (validated as #HyperConverged
// first) and returns out.
func toV1(t *testing.T, filename string, data []byte) (cue.Value, error) {
	t.Helper()
	in := unifyYAML(t, "#HyperConverged", filename, data)
	if err := validate(in); err != nil {
		return cue.Value{}, err
	}
	out := definition(t, "#ToV1").FillPath(cue.ParsePath("in"), in).LookupPath(cue.ParsePath("out"))
	if err := validate(out); err != nil {
		return cue.Value{}, err
	}
	return out, nil
}

// decodeJSON returns v as plain Go data in its JSON form.
func decodeJSON(t *testing.T, v cue.Value) any {
	t.Helper()
	var x any
	if err := v.Decode(&x); err != nil {
		t.Fatal(err)
	}
	return normalize(x)
}

// TestConversion checks #ToV1 against goldens: every
// testdata/conversion/<name>.v1beta1.yaml (HCO api/v1beta1 conversion) and
// <name>.v1-in.yaml (HCO's v1 mutator) must give <name>.v1.yaml. The output
// must also be a valid v1 HyperConverged that #ToV1 leaves unchanged.
// UPDATE_GOLDEN=1 rewrites the goldens (review the diff).
func TestConversion(t *testing.T) {
	var inputs []string
	for _, pattern := range []string{"*.v1beta1.yaml", "*.v1-in.yaml"} {
		m, err := filepath.Glob(filepath.Join("testdata", "conversion", pattern))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, m...)
	}
	if len(inputs) < 10 {
		t.Fatalf("only %d conversion inputs", len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(in), ".v1beta1.yaml"), ".v1-in.yaml")
		golden := filepath.Join("testdata", "conversion", name+".v1.yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := toV1(t, in, data)
			if err != nil {
				t.Fatalf("#ToV1:\n%s", errors.Details(err, nil))
			}
			if os.Getenv("UPDATE_GOLDEN") != "" {
				b, err := yaml.Encode(out)
				if err != nil {
					t.Fatal(err)
				}
				header := "# #ToV1 of " + filepath.Base(in) + " (generated by UPDATE_GOLDEN=1 go test ./schema -run TestConversion; reviewed).\n"
				if err := os.WriteFile(golden, append([]byte(header), b...), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantData, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			ctx, _ := schema(t)
			f, err := yaml.Extract(golden, wantData)
			if err != nil {
				t.Fatal(err)
			}
			got, exp := decodeJSON(t, out), decodeJSON(t, ctx.BuildFile(f))
			if !reflect.DeepEqual(got, exp) {
				gb, _ := json.MarshalIndent(got, "", "  ")
				eb, _ := json.MarshalIndent(exp, "", "  ")
				t.Errorf("#ToV1 output differs from %s\ngot:\n%s\nwant:\n%s", golden, gb, eb)
			}

			// The output is a valid v1 object, and a fixed point of #ToV1.
			b, err := out.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			again, err := toV1(t, name+".out.json", b)
			if err != nil {
				t.Fatalf("#ToV1 of the output:\n%s", errors.Details(err, nil))
			}
			if !reflect.DeepEqual(decodeJSON(t, again), got) {
				t.Errorf("#ToV1 is not idempotent on %s", golden)
			}
		})
	}
}

// TestToV1Rejects: a v1 input whose deprecated gate contradicts its field is
// an error (HCO's v1 mutator denies it), and so is any invalid input.
func TestToV1Rejects(t *testing.T) {
	tests := []struct{ name, yaml, path, msg string }{
		{
			name: "disableMDevConfiguration contradicts enabled",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  featureGates:\n    - name: disableMDevConfiguration\n  virtualization:\n    mediatedDevicesConfiguration:\n      enabled: true\n",
			path: "spec",
			msg:  "featureGates[0]: the deprecated disableMDevConfiguration feature gate (Enabled), and the virtualization.mediatedDevicesConfiguration.enabled field (true) contradict each other; the feature gate must not be set, or should be equal to the negative value of the field",
		},
		{
			name: "persistentReservation contradicts its field (case-insensitive lookup)",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  featureGates:\n    - name: PERSISTENTRESERVATION\n  storage:\n    persistentReservationConfiguration:\n      enabled: false\n",
			path: "spec",
			msg:  "featureGates[0]: the deprecated persistentReservation feature gate (Enabled), and the storage.persistentReservationConfiguration.enabled field (false) contradict each other; the feature gate must not be set, or should be equal to the field",
		},
		{
			name: "enableMultiArchBootImageImport contradicts its field",
			yaml: "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nspec:\n  featureGates:\n    - name: enableMultiArchBootImageImport\n      state: Disabled\n  workloadSources:\n    enableMultiArchBootImageImport: true\n",
			path: "spec",
			msg:  "featureGates[0]: the deprecated enableMultiArchBootImageImport feature gate (Disabled), and the workloadSources.enableMultiArchBootImageImport field (true) contradict each other; the feature gate must not be set, or should be equal to the field",
		},
		{
			name: "invalid v1beta1 input",
			yaml: "apiVersion: hco.kubevirt.io/v1beta1\nkind: HyperConverged\nspec:\n  certConfig:\n    ca:\n      duration: 1m\n",
			path: "spec.certConfig.ca",
			msg:  "duration (1m) must be at least 10m",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := toV1(t, tt.name+".yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error; want %s: %s", tt.path, tt.msg)
			}
			if details := errors.Details(err, nil); !hasErrorLine(details, tt.path, tt.msg) {
				t.Errorf("no error line %q starting with %q:\n%s", tt.msg, tt.path+": ", details)
			}
		})
	}
}

// TestGateEnabled checks #GateEnabled against HCO api/v1/featuregates
// IsEnabled: beta gates default on, alpha and deprecated gates default off,
// unknown and discontinued gates are always off, lookups ignore case.
func TestGateEnabled(t *testing.T) {
	tests := []struct {
		name  string
		gates string // a JSON list
		want  bool
	}{
		{"decentralizedLiveMigration", `[]`, true},
		{"template", `[]`, true},
		{"declarativeHotplugVolumes", `[{"name":"declarativeHotplugVolumes","state":"Disabled"}]`, false},
		{"declarativeHotplugVolumes", `[{"name":"DeclarativeHotplugVolumes","state":"Disabled"}]`, false},
		{"downwardMetrics", `[]`, false},
		{"downwardMetrics", `[{"name":"downwardMetrics"}]`, true},
		{"downwardMetrics", `[{"name":"DOWNWARDMETRICS","state":"Enabled"}]`, true},
		{"alignCPUs", `[{"name":"alignCPUs","state":"Disabled"}]`, false},
		{"deployObservabilityController", `[{"name":"deployObservabilityController"}]`, true},
		{"persistentReservation", `[]`, false},
		{"persistentReservation", `[{"name":"persistentReservation"}]`, true},
		{"nonRoot", `[{"name":"nonRoot"}]`, false},
		{"noSuchGate", `[{"name":"noSuchGate"}]`, false},
		{"noSuchGate", `[]`, false},
	}
	ctx, _ := schema(t)
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.gates, func(t *testing.T) {
			v := definition(t, "#GateEnabled").
				FillPath(cue.MakePath(cue.Def("#gates")), ctx.CompileString(tt.gates)).
				FillPath(cue.MakePath(cue.Def("#name")), tt.name)
			got, err := v.LookupPath(cue.ParsePath("out")).Bool()
			if err != nil {
				t.Fatalf("%s", errors.Details(err, nil))
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
