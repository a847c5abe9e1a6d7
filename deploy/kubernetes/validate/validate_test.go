// Package validate checks the Kubernetes manifests beside it against the
// API's Go types. It is a module of its own so that the main module does
// not depend on k8s.io/api (its download and compile would weigh on every
// build of qwenc); make test-deploy runs it.
package validate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes every document of a manifest file into the type
// its apiVersion and kind name, refusing unknown and duplicate fields (a
// misspelt or misplaced field would otherwise be dropped without a word,
// as kubectl apply does unless the server validates).
func decodeStrict(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	for i, doc := range bytes.Split(b, []byte("\n---")) {
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i+1, err)
		}
		if string(js) == "null" {
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			t.Fatalf("%s: document %d: %v", path, i+1, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "autoscaling/v2 HorizontalPodAutoscaler":
			obj = &autoscalingv2.HorizontalPodAutoscaler{}
		case "networking.k8s.io/v1 Ingress":
			obj = &networkingv1.Ingress{}
		default:
			t.Fatalf("%s: document %d: %s %s is not a kind this test knows", path, i+1, tm.APIVersion, tm.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Fatalf("%s: document %d (%s): %v", path, i+1, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestManifests decodes every manifest strictly, then checks what the
// types cannot: the probes, the volume the init container fills, the
// scrape annotations, that the Service, the Ingress and the HPA point at
// the Deployment, and that memory is requested.
func TestManifests(t *testing.T) {
	files, err := filepath.Glob("../*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("manifests: %v, %v", files, err)
	}
	var dep *appsv1.Deployment
	var svc *corev1.Service
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	var ing *networkingv1.Ingress
	for _, f := range files {
		for _, o := range decodeStrict(t, f) {
			switch o := o.(type) {
			case *appsv1.Deployment:
				dep = o
			case *corev1.Service:
				svc = o
			case *autoscalingv2.HorizontalPodAutoscaler:
				hpa = o
			case *networkingv1.Ingress:
				ing = o
			}
		}
	}
	if dep == nil || svc == nil || hpa == nil || ing == nil {
		t.Fatalf("want a Deployment, a Service, an HPA and an Ingress; got %v %v %v %v", dep != nil, svc != nil, hpa != nil, ing != nil)
	}
	checkDeployment(t, dep)

	labels := dep.Spec.Template.Labels
	for k, v := range dep.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the Deployment's selector %s=%s does not match its pods", k, v)
		}
	}
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].TargetPort.StrVal != "http" {
		t.Errorf("the Service's ports %+v, want one to the pods' http port", p)
	}
	if r := hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != dep.Name {
		t.Errorf("the HPA scales %s %s", r.Kind, r.Name)
	}
	if m := hpa.Spec.Metrics; len(m) != 1 || m[0].Type != autoscalingv2.PodsMetricSourceType || m[0].Pods.Metric.Name != "qwenrun_queued_requests" {
		t.Errorf("the HPA's metrics %+v, want qwenrun_queued_requests per pod", m)
	}
	if ing.Annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == "" {
		t.Errorf("the Ingress routes without a consistent hash")
	}
	if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b.Name != svc.Name {
		t.Errorf("the Ingress sends to %s, not the Service %s", b.Name, svc.Name)
	}
}

func checkDeployment(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	pod := dep.Spec.Template
	for _, a := range []string{"prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path"} {
		if pod.Annotations[a] == "" {
			t.Errorf("the pods lack the annotation %s", a)
		}
	}
	if pod.Annotations["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape path %q", pod.Annotations["prometheus.io/path"])
	}
	spec := pod.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
		t.Fatalf("%d containers and %d init containers, want 1 and 1", len(spec.Containers), len(spec.InitContainers))
	}
	c, ic := spec.Containers[0], spec.InitContainers[0]
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.StrVal != "http" {
			t.Errorf("the %s probe %+v, want GET /health on the http port", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports %+v, want http on 8080", c.Ports)
	}
	if strings.Join(ic.Command[:2], " ") != "qwenc pull" {
		t.Errorf("the init container runs %q, want qwenc pull", ic.Command)
	}
	// The file the init container writes is the one the server opens, on
	// a volume both mount.
	out := ic.Command[len(ic.Command)-1]
	if len(c.Args) == 0 || c.Args[0] != out {
		t.Errorf("the init container writes %s, the server opens %v", out, c.Args)
	}
	mounted := func(ms []corev1.VolumeMount) string {
		for _, m := range ms {
			if strings.HasPrefix(out, m.MountPath+"/") {
				return m.Name
			}
		}
		return ""
	}
	if v := mounted(ic.VolumeMounts); v == "" || v != mounted(c.VolumeMounts) {
		t.Errorf("%s is on volume %q for the init container and %q for the server", out, v, mounted(c.VolumeMounts))
	}
	req, lim := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
	if req.IsZero() || lim.Cmp(req) < 0 {
		t.Errorf("memory request %s, limit %s", req.String(), lim.String())
	}
	// The sizing comment's total (the file, eight q8 KV caches of 4096
	// tokens, arenas and heap) must fit the request.
	if need := resource.MustParse("2694Mi"); req.Cmp(need) < 0 {
		t.Errorf("memory request %s, below the %s the sizing comes to", req.String(), need.String())
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the pod may run as root")
	}
}
