package kubernetes

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/disksplit"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Annotations this backend sets (free text, unlike label values).
const (
	annExpires = model.ReservedLabelPrefix + "expires"
	annTier    = model.ReservedLabelPrefix + "tier"
	annDiskCap = model.ReservedLabelPrefix + "disk_cap"
	annPidsCap = model.ReservedLabelPrefix + "pids_cap"
	// labelOwner is a label: the watcher-less reaper selects an owner's
	// pods. The rest of the owner's record are annotations (ownerAnnotations).
	labelOwner = backends.LabelOwner
)

// Where the wrapper lives inside the sandbox container.
const (
	wrapDir    = "/.sandboxio"
	wrapBin    = wrapDir + "/wrap"
	sandboxCtr = "sandbox"
)

// minTmpfsKiB keeps every volume a real size.
const minTmpfsKiB = 64

// tmpfsSizes splits the disk cap (KiB per path) over the writable paths,
// as the Docker backend's tmpfs strategy does (package disksplit).
func tmpfsSizes(diskMB int64) map[string]int64 {
	total := diskMB * 1024
	sizes := map[string]int64{}
	rest := total
	var restPaths []string
	for _, w := range disksplit.Shares {
		if w.Percent == 0 {
			restPaths = append(restPaths, w.Path)
			continue
		}
		n := max(total*w.Percent/100/4*4, minTmpfsKiB)
		sizes[w.Path] = n
		rest -= n
	}
	n := int64(len(restPaths))
	rest = max(rest, n*minTmpfsKiB)
	part := rest / n / 4 * 4
	for i, p := range restPaths {
		if i == len(restPaths)-1 {
			part = rest - part*(n-1)
		}
		sizes[p] = part
	}
	return sizes
}

// diskDescription says how the disk cap is enforced.
func diskDescription(diskMB int64) string {
	sizes := tmpfsSizes(diskMB)
	parts := make([]string, 0, len(disksplit.Shares))
	for _, w := range disksplit.Shares {
		parts = append(parts, fmt.Sprintf("%s=%dk", w.Path, sizes[w.Path]))
	}
	return "emptyDir: read-only root filesystem, memory-backed emptyDir volumes (tmpfs, size=sizeLimit) " + strings.Join(parts, ",") +
		fmt.Sprintf(" (total %dM, also charged to memory); /dev is the runtime's 64M tmpfs, writable and charged to memory only", diskMB)
}

func volumeName(path string) string {
	return "w" + strings.NewReplacer("/", "-", ".", "-").Replace(path)
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// podFor builds the sandbox's pod: hardened as a Docker sandbox is (no
// capabilities, no privilege escalation, RuntimeDefault seccomp, no host
// namespaces, no service-account token or service links, read-only root
// with size-limited writable volumes, requests = limits), with the kubelet
// ending it at its lifetime (activeDeadlineSeconds) whoever is around.
func podFor(p createPlan, name string, lbls, ann map[string]string) *corev1.Pod {
	no, yes := false, true
	deadline := int64(math.Ceil(p.lifetime.Seconds()))
	milli := int64(math.Ceil(p.caps.CPU * 1000))
	res := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(milli, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(p.caps.MemoryMB<<20, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(p.caps.DiskMB<<20, resource.BinarySI),
	}
	initRes := corev1.ResourceList{corev1.ResourceCPU: qty("100m"), corev1.ResourceMemory: qty("32Mi"), corev1.ResourceEphemeralStorage: qty("16Mi")}
	sec := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: &no,
		Privileged:               &no,
		ReadOnlyRootFilesystem:   &yes,
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	wrapVol := corev1.Volume{Name: "sandboxio-wrap", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr(qty("8Mi"))}}}
	vols := []corev1.Volume{wrapVol}
	mounts := []corev1.VolumeMount{{Name: wrapVol.Name, MountPath: wrapDir, ReadOnly: true}}
	for path, kib := range tmpfsSizes(p.caps.DiskMB) {
		v := corev1.Volume{Name: volumeName(path), VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(kib<<10, resource.BinarySI)}}}
		vols = append(vols, v)
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: path})
	}
	sortVolumes(vols, mounts)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, Annotations: ann},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			TerminationGracePeriodSeconds: ptr(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name: "sandboxio-wrap", Image: WrapImage, ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/wrap", "install", wrapBin},
				VolumeMounts:    []corev1.VolumeMount{{Name: wrapVol.Name, MountPath: wrapDir}},
				SecurityContext: sec,
				Resources:       corev1.ResourceRequirements{Requests: initRes, Limits: initRes},
			}},
			Containers: []corev1.Container{{
				Name: sandboxCtr, Image: p.spec.Image, ImagePullPolicy: corev1.PullIfNotPresent,
				// The wrapper holds the sandbox open and reaps orphans; the
				// image needs no sleep and no shell.
				Command:         []string{wrapBin, "hold"},
				VolumeMounts:    mounts,
				SecurityContext: sec,
				Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
			Volumes: vols,
		},
	}
	if p.runtimeClass != "" {
		pod.Spec.RuntimeClassName = &p.runtimeClass
	}
	return pod
}

// sortVolumes keeps the pod spec deterministic (map order otherwise); the
// wrapper's volume stays first.
func sortVolumes(vols []corev1.Volume, mounts []corev1.VolumeMount) {
	rest := vols[1:]
	sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	rm := mounts[1:]
	sort.Slice(rm, func(i, j int) bool { return rm[i].Name < rm[j].Name })
}

func ptr[T any](v T) *T { return &v }
