# converge — see README.md. Heavy builds are cached in the gitignored bin/.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
export KUBEBUILDER_ASSETS := $(BIN)

## VERSION is what `converge version` prints and the images' tag; every
## binary gets it (internal/images.LDFlags gives the same flag).
VERSION ?= dev
LDFLAGS := -X github.com/converge-dev/converge/internal/cli.Version=$(VERSION)
## GOTAGS: the build tags of every converge binary (internal/images.BuildTags
## is the same). kustomize_disable_go_plugin_support keeps Go's plugin
## package out: kustomize/api, reached through fluxcd/pkg/ssa's kstatus
## poller, imports it to load kustomize Go plugins, which converge never
## does, and a binary linking it exports every symbol (converge-controller
## 186 -> 145 MB, about 20 MiB less resident)
GOTAGS := kustomize_disable_go_plugin_support

.PHONY: all build cli-binaries images guest guest-debian test fuzz demo bench bench-scale flux vet controlplane cluster-bins cluster cluster-stop cluster-status cni clean gen-kubevirt gen-crds

all: build

## build: the converge CLI, converge-controller (no cgo, as in its image),
## converge-node and the demo into bin/
build:
	$(GO) build -tags $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/converge ./cmd/converge
	CGO_ENABLED=0 $(GO) build -tags $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/converge-controller ./cmd/converge-controller
	$(GO) build -tags $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/converge-node ./cmd/converge-node
	$(GO) build -tags $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/converge-demo ./hack/demo

## cli-binaries: the converge CLI for linux, darwin and windows on amd64
## and arm64 (CGO_ENABLED=0) in bin/images/build/cli/<arch>/<os>/
## converge[.exe], which `make images` bakes into the controller image for
## its cli-download server (make images alone carries linux/<host arch>) (a first darwin
## build took 14 min on a loaded 2-core machine with a cold cache)
CLI_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
cli-binaries:
	for p in $(CLI_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -tags $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/images/build/cli/$$arch/$$os/converge$$ext ./cmd/converge || exit 1; done

## images: bin/images/converge-controller.tar and converge-node.tar,
## docker-archive tarballs tagged ghcr.io/converge-dev/<name>:$(VERSION),
## for `ctr -n k8s.io images import` (Debian packages cached in
## bin/images/apt; an archive whose inputs did not change is kept)
images: cni
	$(GO) run ./hack/images -version "$(VERSION)"

## guest: the end-to-end test guest (hack/guest) in bin/guest, from
## Debian packages (apt-get download; qemu-img from qemu-utils): vmlinuz
## and initrd.gz for kernelBoot, disk.img (raw, SeaBIOS boots it: SYSLINUX
## on FAT, converge.dhcp=1 converge.cloudinit=1) and disk.qcow2 (the
## sources of the DataVolume and containerDisk tests); nothing when its
## stamp is current. The tests build it too (vmtest.BuildGuest).
guest:
	cd hack/guest && $(GO) run . -out $(BIN)/guest

## guest-debian: the guest and bin/guest/debian.qcow2, the demo's VM:
## Debian bookworm installed by debootstrap (the cloud kernel, systemd,
## cloud-init run by its own units, ifupdown and the ISC DHCP client) on
## an ext4 partition that extlinux boots; root, and a few minutes the
## first time (debootstrap, extlinux, fdisk and syslinux-common are
## installed with apt when missing); nothing when debian.stamp is current
guest-debian:
	cd hack/guest && $(GO) run . -out $(BIN)/guest -debian

## controlplane: kube-apiserver, etcd and kube-controller-manager (the PV
## binder for the provisioner tests), and cluster-bins, built from Go
## modules (all five ≈8 min with an empty Go build cache on 2 cores, more
## on a busy machine; nothing once bin/ holds them)
controlplane: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kube-controller-manager cluster-bins
## cluster-bins: kubelet, kube-scheduler and kube-proxy for the local cluster (≈45 s
## after the other three, whose build cache they share; ≈16 min alone
## with an empty cache on a busy machine)
cluster-bins: $(BIN)/kubelet $(BIN)/kube-scheduler $(BIN)/kube-proxy
$(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kube-controller-manager $(BIN)/kubelet $(BIN)/kube-scheduler $(BIN)/kube-proxy $(BIN)/kubectl:
	hack/controlplane/build.sh $(BIN) $(notdir $@)

## cluster: start the local single-node cluster (internal/testing/cluster:
## etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
## kube-proxy (nftables mode), containerd, a CNI bridge; as root, containerd and runc from apt) and
## leave it running; state and logs in bin/cluster. cluster-stop stops it
## and cleans the host; cluster-status says what runs.
cluster: controlplane cni
	$(GO) build -o $(BIN)/converge-cluster ./hack/cluster
	$(BIN)/converge-cluster start -dir $(BIN)/cluster
cluster-stop:
	$(GO) build -o $(BIN)/converge-cluster ./hack/cluster
	$(BIN)/converge-cluster stop
cluster-status:
	$(GO) build -o $(BIN)/converge-cluster ./hack/cluster
	$(BIN)/converge-cluster status

## cni: the CNI plugins converge-node cni-install installs (containernetworking/plugins, pinned as go.mod tools)
CNI_VERSION := v1.9.1
CNI_PKG := github.com/containernetworking/plugins/plugins
CNI_PLUGINS := main/bridge ipam/host-local main/loopback
cni: $(addprefix $(BIN)/cni/,$(notdir $(CNI_PLUGINS)))
$(BIN)/cni/%: go.mod
	$(GO) build -ldflags "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(CNI_VERSION)" \
		-o $@ $(CNI_PKG)/$(filter %/$*,$(CNI_PLUGINS))

## bin/virtctl: upstream KubeVirt virtctl (the version pinned in
## hack/virtctl/build.sh, v1.8.2: v1.9's template modules are not served
## by the module proxy here) for the tests that drive converge with it;
## ≈15 min on a busy 2-core machine with a cold cache, nothing once built
$(BIN)/virtctl:
	hack/virtctl/build.sh $(BIN)

## cue: the cue CLI at the pinned version, for the plain `cue vet` tests
$(BIN)/cue: go.mod
	$(GO) build -o $(BIN)/cue cuelang.org/go/cmd/cue

## gen-kubevirt: regenerate components/virt/gen (CUE of kubevirt.io/api, the
## VM/VMI CRD schemas) with cue get go from the module cache
gen-kubevirt: $(BIN)/cue
	components/virt/gen/generate.sh
	$(MAKE) gen-crds

## gen-crds: regenerate internal/graph/crds.gen.json, the CRDs derived from the CUE
## (a test fails while it is stale)
gen-crds:
	$(GO) test ./internal/graph -run '^TestGeneratedCRDsUpToDate$$' -update-crds

## demo: converge as a user runs it, on the local single-node cluster (as
## root; containerd and runc from apt when missing): it builds converge
## and its images of version demo into bin/images/demo, then narrates with
## the real CLI — install, a Sync of testdata/example from a local Git
## server, health gates opening as the native operators' pods become
## ready, a commit, drift reverted, a deleted pod healed, events,
## suspend/resume — and stops everything at the end or on Ctrl-C
demo: controlplane cni $(BIN)/kubectl guest-debian
	$(GO) build -buildvcs=false -o $(BIN)/converge-demo ./hack/demo
	$(BIN)/converge-demo

## test: every test, against the real API server, git server and cue CLI;
## as root, internal/e2e/cluster runs converge from its images on the
## local cluster (it builds the binaries and images of version e2e itself
## into bin/images/e2e, with the Debian packages of bin/images/apt: the
## images of `make images` carry $(VERSION), not the tests' version)
test: controlplane $(BIN)/cue cni $(BIN)/virtctl
	$(GO) vet ./...
	PATH=$(BIN):$$PATH $(GO) test -count=1 -timeout 30m ./...
	cd hack/guest && $(GO) test -count=1 ./...
	$(MAKE) fuzz

## fuzz: a short run of each fuzz target, about 10 s each (FuzzRender 20
## renders, a render taking about a second); a crasher found is written to
## the package's testdata/fuzz/<target> and fails the run. Budgets are
## iteration counts, not durations: Go 1.26's coordinator can fail a timed
## run at its deadline with "context deadline exceeded" (golang/go#75804)
fuzz: $(BIN)/cue
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 2000x ./internal/graph/config
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzPushRef$$' -fuzztime 20000x ./gitops/receiver
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzSignature$$' -fuzztime 5000x ./gitops/receiver
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzVolumeID$$' -fuzztime 2000x ./nodeplane/csi/hostpath
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzSnapshotID$$' -fuzztime 1000x ./nodeplane/csi/hostpath
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzVMAdmission$$' -fuzztime 50000x ./operators/virt/vmadmission
	PATH=$(BIN):$$PATH $(GO) test -run '^$$' -fuzz '^FuzzRender$$' -fuzztime 20x ./internal/graph

## bench: render and apply against a local API server; commit-to-applied
## latency through converge-controller's push receiver next to applying the
## same change in-process, and the controller's memory; MAC allocations/s
## (pool alone, and VM creations with and without the MAC pool webhook);
## CNI ADD+DEL through converge next to the bridge plugin alone (root);
## image import next to qemu-img convert; CSI NodePublish (root); VMI →
## Running through the agent next to defining the domain directly; local
## cluster start to Node Ready and to the default ServiceAccount next to
## etcd+kube-apiserver alone (root); `converge install` to converge-controller
## Ready, and `converge install --sync-url` to the Sync Ready through the
## native operators, on that cluster next to applying the controller's
## bundle in-process (root); on that cluster too, a DataVolume-backed VM
## created → the guest's marker on its console, next to the same VM
## booting a DataVolume imported before (root; skips while converge vet
## refuses its VM); converge beside Flux's controllers (make flux) on the
## same kind of API server and Git server, with kubectl apply --server-side
## as the anchor, printed as a table with ratios; a VirtualMachineSnapshot
## created → readyToUse through the snapshot controller, the node's
## csi-snapshotter and the hostpath driver, next to a VolumeSnapshot of the
## same claim. Every result goes to $(BENCH_LOG); at the end hack/benchtable
## prints issue 18's table from it (each figure, its floor or anchor of the
## same run, the ratio, the goal, met or not) into $(BIN)/bench/table.md
BENCH_LOG := $(BIN)/bench/bench.txt
bench: controlplane cni flux $(BIN)/kubectl
	mkdir -p $(BIN)/bench && rm -f $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^(BenchmarkRender|BenchmarkApply)$$' -benchtime 3x ./internal/bench/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench CommitToApplied -benchtime 15x ./internal/bench/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkFlux$$' -benchtime 10x -timeout 30m ./internal/bench/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime 1000x ./operators/network/macpool/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; PATH=$(BIN):$$PATH $(GO) test -run '^$$' -bench AddDel -benchtime 50x -v ./nodeplane/network/netattach/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; PATH=$(BIN):$$PATH $(GO) test -run '^$$' -bench Import -benchtime 3x ./nodeplane/cdi/importer/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench NodePublish -benchtime 20x ./nodeplane/csi/hostpath/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkClone$$' -benchtime 5x ./nodeplane/csi/hostpath/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkVMSnapshot$$' -benchtime 10x ./internal/bench/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench VMIToRunning -benchtime 50x ./nodeplane/vm/agent/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench ContainerDiskPull -benchtime 5x ./nodeplane/vm/vmdisks/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkStart$$' -benchtime 3x ./internal/testing/cluster/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkInstall$$' -benchtime 5x -timeout 60m ./internal/bench/ 2>&1 | tee -a $(BENCH_LOG)
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkVMFromDataVolume$$' -benchtime 3x -timeout 60m ./internal/bench/ 2>&1 | tee -a $(BENCH_LOG)
	$(GO) run ./hack/benchtable $(BENCH_LOG) | tee $(BIN)/bench/table.md

## bench-scale: scale by simulation on one machine (issue 18): VMs from
## creation to Running across simulated nodes (the real VM agent on
## libvirt's test driver, one per node) with converge-controller as a
## process, per size of a sweep: throughput, p50/p99 latency, the
## controller's CPU and peak RSS; PNG curves in $(BIN)/bench. Sweep
## 100/5,250/10,500/25 (VMs/nodes); SCALE=full adds 1000/50;
## CONVERGE_SCALE_VMS sets any sweep. Then Syncs each driving its own
## remote target API server (2, 5, 10; CONVERGE_SCALE_SYNCS): first sync
## and no-op throughput, API requests per no-op, the controller's RSS
SCALE ?=
bench-scale: controlplane
	CONVERGE_SCALE=$(SCALE) $(GO) test -run '^$$' -bench '^BenchmarkVMScale$$' -benchtime 1x -timeout 60m -v ./internal/bench/scale/
	$(GO) test -run '^$$' -bench '^BenchmarkSyncScale$$' -benchtime 1x -timeout 30m -v ./internal/bench/scale/

## flux: Flux's source-controller v1.9.1 and kustomize-controller v1.9.4
## with their CRDs in bin/flux, built from the Go module proxy
## (hack/flux/build.sh; a version-stamped cache: 2-4 min each on an idle
## 2-core machine, 23-42 min under load); for make bench only
flux:
	hack/flux/build.sh $(BIN)

clean:
	rm -rf $(BIN)
