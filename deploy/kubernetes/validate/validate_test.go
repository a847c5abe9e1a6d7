// Package validate checks the Kubernetes manifests beside it against the
// API's Go types. It is a module of its own so that the main module does
// not depend on k8s.io/api (its download and compile would weigh on every
// build of qwenc); make test-deploy runs it.
package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes every document of a manifest file into the object
// m gives for its apiVersion and kind, refusing unknown and duplicate
// fields (a misspelt or misplaced field would otherwise be dropped without
// a word, as kubectl apply does unless the server validates).
func decodeStrict(t *testing.T, path string, m *manifests) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
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
		obj := m.object(tm.APIVersion + " " + tm.Kind)
		if obj == nil {
			t.Fatalf("%s: document %d: %s %s is not a kind this test knows", path, i+1, tm.APIVersion, tm.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Fatalf("%s: document %d (%s): %v", path, i+1, tm.Kind, err)
		}
	}
}

// manifests are the objects of the files beside this module, by kind.
type manifests struct {
	dep    *appsv1.Deployment
	svc    *corev1.Service
	hpa    *autoscalingv2.HorizontalPodAutoscaler
	ing    *networkingv1.Ingress
	gw     *gwapiv1.Gateway
	route  *gwapiv1.HTTPRoute
	policy *egv1a1.BackendTrafficPolicy
}

// object is a new object of a kind ("apiVersion kind"), kept in m; nil
// for a kind the manifests are not to have.
func (m *manifests) object(kind string) any {
	switch kind {
	case "apps/v1 Deployment":
		return keep(&m.dep)
	case "v1 Service":
		return keep(&m.svc)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return keep(&m.hpa)
	case "networking.k8s.io/v1 Ingress":
		return keep(&m.ing)
	case "gateway.networking.k8s.io/v1 Gateway":
		return keep(&m.gw)
	case "gateway.networking.k8s.io/v1 HTTPRoute":
		return keep(&m.route)
	case "gateway.envoyproxy.io/v1alpha1 BackendTrafficPolicy":
		return keep(&m.policy)
	}
	return nil
}

// keep makes a new T, kept in *at.
func keep[T any](at **T) any {
	*at = new(T)
	return *at
}

// TestManifests decodes every manifest strictly, then checks what the
// types cannot: the probes, the volume the init container fills, the
// scrape annotations, that the Service, the Ingress, the HTTPRoute and
// the HPA point at the Deployment, that both sticky routings hash the
// same header, and that memory is requested as the sizing says.
func TestManifests(t *testing.T) {
	files, err := filepath.Glob("../*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("manifests: %v, %v", files, err)
	}
	var m manifests
	for _, f := range files {
		decodeStrict(t, f, &m)
	}
	if m.dep == nil || m.svc == nil || m.hpa == nil || m.ing == nil || m.gw == nil || m.route == nil || m.policy == nil {
		t.Fatalf("want a Deployment, a Service, an HPA, an Ingress, a Gateway, an HTTPRoute and a BackendTrafficPolicy; got %+v", m)
	}
	dep, svc, hpa, ing := m.dep, m.svc, m.hpa, m.ing
	checkDeployment(t, dep)
	checkGateway(t, m)

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
	if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b.Name != svc.Name {
		t.Errorf("the Ingress sends to %s, not the Service %s", b.Name, svc.Name)
	}
}

// checkGateway: the Gateway API route goes through its Gateway to the
// Service's port, with no deadline on streamed answers, and Envoy
// Gateway's policy on that route hashes the header the ingress-nginx
// example hashes.
func checkGateway(t *testing.T, m manifests) {
	t.Helper()
	route, gw, policy := m.route, m.gw, m.policy
	if p := route.Spec.ParentRefs; len(p) != 1 || string(p[0].Name) != gw.Name {
		t.Errorf("the HTTPRoute's parents %+v, want the Gateway %s", p, gw.Name)
	}
	host := m.ing.Spec.Rules[0].Host
	if h := route.Spec.Hostnames; len(h) != 1 || string(h[0]) != host || len(gw.Spec.Listeners) != 1 || gw.Spec.Listeners[0].Hostname == nil || string(*gw.Spec.Listeners[0].Hostname) != host {
		t.Errorf("the HTTPRoute's hosts %v and the Gateway's listeners %+v, want %s as the Ingress has", h, gw.Spec.Listeners, host)
	}
	if len(route.Spec.Rules) != 1 {
		t.Fatalf("the HTTPRoute's rules %+v, want one", route.Spec.Rules)
	}
	r := route.Spec.Rules[0]
	if b := r.BackendRefs; len(b) != 1 || string(b[0].Name) != m.svc.Name || b[0].Port == nil || int32(*b[0].Port) != m.svc.Spec.Ports[0].Port {
		t.Errorf("the HTTPRoute sends to %+v, not the Service %s's port %d", b, m.svc.Name, m.svc.Spec.Ports[0].Port)
	}
	if r.Timeouts == nil || r.Timeouts.Request == nil || *r.Timeouts.Request != "0s" {
		t.Errorf("the HTTPRoute's request timeout is not 0s (none): a streamed answer would be cut")
	}
	if tr := policy.Spec.TargetRefs; len(tr) != 1 || tr[0].Group != gwapiv1.GroupName || tr[0].Kind != "HTTPRoute" || string(tr[0].Name) != route.Name {
		t.Errorf("the BackendTrafficPolicy applies to %+v, not the HTTPRoute %s", tr, route.Name)
	}
	lb := policy.Spec.LoadBalancer
	if lb == nil || lb.Type != egv1a1.ConsistentHashLoadBalancerType || lb.ConsistentHash == nil || lb.ConsistentHash.Type != egv1a1.HeadersConsistentHashType ||
		len(lb.ConsistentHash.Headers) != 1 {
		t.Fatalf("the BackendTrafficPolicy's load balancer %+v, want a consistent hash of one header", lb)
	}
	// ingress-nginx names a header $http_ and its name in lower case, - as _.
	header := lb.ConsistentHash.Headers[0].Name
	nginx := "$http_" + strings.ReplaceAll(strings.ToLower(header), "-", "_")
	if got := m.ing.Annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]; header != "X-Session-Id" || got != nginx {
		t.Errorf("Envoy Gateway hashes %s, ingress-nginx %q; want X-Session-Id both (%q)", header, got, nginx)
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
	// The sizing's total must fit the request.
	if need := sizing(t, c.Args); req.Cmp(need) < 0 {
		t.Errorf("memory request %s, below the %s the sizing comes to", req.String(), need.String())
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the pod may run as root")
	}
}

// figures are what testdata/qwen3-0.6b-q8.json records of the model the
// Deployment serves (its "how" says how they were made): the file's size
// and qwenc inspect's memory report.
type figures struct {
	FileBytes int64 `json:"file_bytes"`
	Memory    struct {
		Arena struct {
			DecodeBytes  int64 `json:"decode_bytes"`
			PrefillBytes int64 `json:"prefill_bytes"`
		}
		KV struct {
			Type  string
			BySeq []struct {
				Seq        int
				TotalBytes int64 `json:"total_bytes"`
			} `json:"by_seq"`
		}
	}
}

// arenasAndHeap is the sizing's allowance for the activation arenas
// (planned at compile time: the figures give them) and the Go heap (no
// figure gives it: an estimate, from qwenrun's resident memory beside the
// file and the KV caches).
const arenasAndHeap = 150 << 20

const mib = 1 << 20

// sizing is the memory the server's args need, computed as
// deployment.yaml's comment and docs/deploy.md compute it: the file (mapped,
// charged to the pod once read), --parallel KV caches of --ctx tokens of
// --kv-type, and arenasAndHeap; rounded up to a MiB. It checks that the
// comment and docs/deploy.md quote the figures as they are.
func sizing(t *testing.T, args []string) resource.Quantity {
	t.Helper()
	flag := func(name string) string {
		i := slices.Index(args, name)
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("the server's args %q lack %s", args, name)
		}
		return args[i+1]
	}
	parallel, err1 := strconv.Atoi(flag("--parallel"))
	ctx, err2 := strconv.Atoi(flag("--ctx"))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/qwen3-0.6b-q8.json")
	if err != nil {
		t.Fatal(err)
	}
	var f figures
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if f.Memory.KV.Type != flag("--kv-type") {
		t.Fatalf("the figures size a %s KV cache, the server runs %s", f.Memory.KV.Type, flag("--kv-type"))
	}
	var kv int64
	for _, s := range f.Memory.KV.BySeq {
		if s.Seq == ctx {
			kv = s.TotalBytes
		}
	}
	arenas := f.Memory.Arena.PrefillBytes + f.Memory.Arena.DecodeBytes
	if f.FileBytes == 0 || kv == 0 || arenas == 0 || arenas >= arenasAndHeap {
		t.Fatalf("figures %+v: want the file, the KV cache at %d tokens, and arenas within %d MiB", f, ctx, arenasAndHeap/mib)
	}
	need := f.FileBytes + int64(parallel)*kv + arenasAndHeap
	needMiB := (need + mib - 1) / mib

	// What the comment and docs/deploy.md say, from the same figures; spaces
	// and line breaks aside.
	file, kvs := float64(f.FileBytes)/mib, float64(kv)/mib
	comment := []string{
		fmt.Sprintf("%.0f MiB", file),
		fmt.Sprintf("%d conversations x %.1f MiB at %d tokens %.0f MiB", parallel, kvs, ctx, float64(parallel)*kvs),
		fmt.Sprintf("prefill %.0f MiB, decode %.1f MiB", float64(f.Memory.Arena.PrefillBytes)/mib, float64(f.Memory.Arena.DecodeBytes)/mib),
		fmt.Sprintf("~%d MiB", arenasAndHeap/mib),
		fmt.Sprintf("total %d MiB", needMiB),
	}
	readme := []string{
		fmt.Sprintf("%.0f MiB of file + %d x %.1f MiB of KV cache + about %d MiB of arenas and Go heap = %d MiB", file, parallel, kvs, arenasAndHeap/mib, needMiB),
	}
	for path, want := range map[string][]string{"../deployment.yaml": comment, "../../../docs/deploy.md": readme} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not say %q, which the figures come to", path, w)
			}
		}
	}
	return *resource.NewQuantity(needMiB*mib, resource.BinarySI)
}
