package inmemory

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/version"
)

// apiServer answers the Kubernetes REST API for one simulated cluster from
// its store: discovery, get, list, watch (resumable by resourceVersion, and
// the watch-list stream informers open first), create, update, merge /
// JSON / strategic-merge patches, apply, delete, the status subresource,
// Pod eviction and port-forward. Authentication is the TLS client
// certificate: anyone the cluster CA vouches for is an administrator, and
// a client without one is Unauthorized everywhere but the health and
// version endpoints (kube-apiserver's anonymous public-info access).
type apiServer struct {
	store *store
	// requests counts every request, for tests and the benchmark.
	requests func(verb string)
	// dialPod reaches a Pod's port for pods/portforward.
	dialPod podDialer
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	if a.requests != nil {
		a.requests(r.Method)
	}
	switch path {
	case "":
		// The root lists the server's paths, as kube-apiserver's does;
		// clients probe it to tell whether a server answers at all.
		writeJSON(w, http.StatusOK, map[string][]string{"paths": {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"}})
		return
	case "healthz", "readyz", "livez":
		_, _ = io.WriteString(w, "ok")
		return
	case "version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "35", "gitVersion": version.Kubernetes(), "platform": "simulated/inmemory"})
		return
	}
	// The TLS layer verified any certificate given against the cluster CA
	// (sim.go's apiTLS); a connection without a verified chain gave none.
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		writeStatus(w, apierrors.NewUnauthorized("a client certificate signed by the cluster CA is required: use the cluster's kubeconfig (the <cluster>-kubeconfig Secret)"))
		return
	}
	switch path {
	case "api":
		writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
		return
	case "api/v1":
		writeJSON(w, http.StatusOK, resourceList(v1))
		return
	case "apis":
		writeJSON(w, http.StatusOK, groupList())
		return
	}
	parts := strings.Split(path, "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 2 && parts[0] == "api" && parts[1] == "v1":
		gv, parts = v1, parts[2:]
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range groupList().Groups {
			if g.Name == parts[1] {
				writeJSON(w, http.StatusOK, g)
				return
			}
		}
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, path))
		return
	case len(parts) >= 3 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, path))
		return
	}
	if len(parts) == 0 {
		if list := resourceList(gv); len(list.APIResources) > 0 {
			writeJSON(w, http.StatusOK, list)
			return
		}
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, path))
		return
	}
	ns := ""
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	res, ok := lookup(gv, parts[0])
	allNamespaces := res.namespaced && ns == "" && len(parts) == 1 && r.Method == http.MethodGet
	if !ok || (!res.namespaced && ns != "") || (res.namespaced && ns == "" && !allNamespaces) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: parts[0]}, ""))
		return
	}
	name, sub := "", ""
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	a.serveResource(w, r, res, ns, name, sub)
}

func (a *apiServer) serveResource(w http.ResponseWriter, r *http.Request, res resource, ns, name, sub string) {
	q := r.URL.Query()
	switch {
	case (r.Method == http.MethodPost || r.Method == http.MethodGet) && name != "" && sub == "portforward" && res.name == "pods":
		a.portForward(w, r, res, ns, name)
	case r.Method == http.MethodGet && name == "" && (q.Get("watch") == "true" || q.Get("watch") == "1"):
		a.watch(w, r, res, ns)
	case r.Method == http.MethodGet && name == "":
		a.list(w, r, res, ns)
	case r.Method == http.MethodGet:
		o, ok := a.store.get(res.storeKey(), ns, name)
		if !ok {
			writeStatus(w, apierrors.NewNotFound(res.gr(), name))
			return
		}
		if wantsTable(r.Header.Get("Accept")) {
			writeJSON(w, http.StatusOK, table(res, []object{o}, rvOf(o)))
			return
		}
		writeJSON(w, http.StatusOK, o)
	case r.Method == http.MethodPost && name != "" && sub == "eviction" && res.name == "pods":
		// The simulated kubelet stops the Pod at once; no disruption
		// budget is consulted.
		if _, err := a.store.remove(res.gr(), res.storeKey(), ns, name); err != nil {
			writeStatus(w, err)
			return
		}
		a.changed(res, nil)
		writeJSON(w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	case r.Method == http.MethodPost && name == "":
		o, err := readObject(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		stamp(o, res, ns)
		if q.Get("dryRun") != "" {
			writeJSON(w, http.StatusCreated, o)
			return
		}
		created, err := a.store.create(res.gr(), res.storeKey(), o)
		if err != nil {
			writeStatus(w, err)
			return
		}
		a.changed(res, created)
		writeJSON(w, http.StatusCreated, created)
	case r.Method == http.MethodPut && name != "":
		o, err := readObject(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		stamp(o, res, ns)
		metaOf(o)["name"] = name
		cur, ok := a.store.get(res.storeKey(), ns, name)
		if !ok {
			writeStatus(w, apierrors.NewNotFound(res.gr(), name))
			return
		}
		a.write(w, res, cur, scope(cur, o, res, sub))
	case r.Method == http.MethodPatch && name != "":
		a.patch(w, r, res, ns, name, sub)
	case r.Method == http.MethodDelete && name != "":
		o, err := a.store.remove(res.gr(), res.storeKey(), ns, name)
		if err != nil {
			writeStatus(w, err)
			return
		}
		a.changed(res, nil)
		writeJSON(w, http.StatusOK, o)
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(res.gr(), r.Method))
	}
}

// write stores o in place of cur and answers with what was stored.
func (a *apiServer) write(w http.ResponseWriter, res resource, cur, o object) {
	if rv := rvOf(o); rv == "" {
		metaOf(o)["resourceVersion"] = rvOf(cur)
	}
	stored, err := a.store.update(res.gr(), res.storeKey(), o)
	if err != nil {
		writeStatus(w, err)
		return
	}
	a.changed(res, stored)
	writeJSON(w, http.StatusOK, stored)
}

func (a *apiServer) changed(res resource, o object) {
	if a.store.onWrite != nil && o != nil {
		a.store.onWrite(res.storeKey(), o)
	}
}

// scope keeps what a write may not change: the status through the main
// resource of a kind with a status subresource, and everything but the
// status through the status subresource.
func scope(cur, o object, res resource, sub string) object {
	switch {
	case sub == "status":
		out := copyObject(cur)
		if st, ok := o["status"]; ok {
			out["status"] = st
		} else {
			delete(out, "status")
		}
		metaOf(out)["resourceVersion"] = rvOf(o)
		return out
	case res.status:
		if st, ok := cur["status"]; ok {
			o["status"] = st
		} else {
			delete(o, "status")
		}
	}
	return o
}

func (a *apiServer) patch(w http.ResponseWriter, r *http.Request, res resource, ns, name, sub string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	pt := types.PatchType(mediaType(r.Header.Get("Content-Type")))
	cur, exists := a.store.get(res.storeKey(), ns, name)
	if pt == types.ApplyPatchType || pt == types.ApplyCBORPatchType {
		if body, err = yaml.YAMLToJSON(body); err != nil {
			writeStatus(w, apierrors.NewBadRequest("the apply body is not YAML or JSON: "+err.Error()))
			return
		}
		if !exists {
			o := object{}
			if err := json.Unmarshal(body, &o); err != nil {
				writeStatus(w, apierrors.NewBadRequest(err.Error()))
				return
			}
			stamp(o, res, ns)
			metaOf(o)["name"] = name
			created, err := a.store.create(res.gr(), res.storeKey(), o)
			if err != nil {
				writeStatus(w, err)
				return
			}
			a.changed(res, created)
			writeJSON(w, http.StatusCreated, created)
			return
		}
		// Apply is served as a strategic merge of the applied fields:
		// field ownership is not tracked, so a field an applier stops
		// sending stays. Capstan's core applies only fields it keeps.
		pt = types.StrategicMergePatchType
	}
	if !exists {
		writeStatus(w, apierrors.NewNotFound(res.gr(), name))
		return
	}
	curJSON, err := json.Marshal(cur)
	if err != nil {
		writeStatus(w, err)
		return
	}
	var out []byte
	switch pt {
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(curJSON, body)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(body); err == nil {
			out, err = p.Apply(curJSON)
		}
	case types.StrategicMergePatchType:
		typed, terr := clientgoscheme.Scheme.New(res.gv.WithKind(res.kind))
		if terr != nil {
			out, err = jsonpatch.MergePatch(curJSON, body)
		} else {
			out, err = strategicpatch.StrategicMergePatch(curJSON, body, typed)
		}
	default:
		writeStatus(w, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", res.gr(), name, "unsupported patch type "+string(pt), 0, false))
		return
	}
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("cannot apply the patch: "+err.Error()))
		return
	}
	o := object{}
	if err := json.Unmarshal(out, &o); err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	normalise(o)
	// A patch that names a resourceVersion must find exactly that one
	// (optimistic locking); one that does not, applies to the latest.
	if rvOf(o) != rvOf(cur) && rvOf(o) != "" {
		writeStatus(w, apierrors.NewConflict(res.gr(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again")))
		return
	}
	a.write(w, res, cur, scope(cur, o, res, sub))
}

func (a *apiServer) list(w http.ResponseWriter, r *http.Request, res resource, ns string) {
	ls, fs, err := selectors(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	items, rv := a.store.list(res.storeKey(), ns, ls, fs)
	if wantsTable(r.Header.Get("Accept")) {
		writeJSON(w, http.StatusOK, table(res, items, strconv.FormatUint(rv, 10)))
		return
	}
	if items == nil {
		items = []object{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": res.gv.String(), "kind": res.kind + "List",
		"metadata": map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)},
		"items":    items,
	})
}

func selectors(r *http.Request) (labels.Selector, fields.Selector, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("labelSelector: " + err.Error())
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("fieldSelector: " + err.Error())
	}
	return ls, fs, nil
}

// watch streams events as newline-separated JSON until the client goes,
// the timeout passes, or the store closes the watch.
func (a *apiServer) watch(w http.ResponseWriter, r *http.Request, res resource, ns string) {
	ls, fs, err := selectors(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	q := r.URL.Query()
	from, _ := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
	initial := q.Get("sendInitialEvents") == "true"
	wt, replay, rv, err := a.store.watch(res.storeKey(), ns, ls, fs, from, initial)
	if errors.Is(err, errGone) {
		writeStatus(w, apierrors.NewResourceExpired("too old resource version: "+q.Get("resourceVersion")))
		return
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer a.store.stopWatch(wt)
	timeout := 30 * time.Minute
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(typ string, o any) bool {
		if err := enc.Encode(map[string]any{"type": typ, "object": o}); err != nil {
			return false
		}
		return true
	}
	for _, e := range replay {
		if !send(e.Type, e.obj) {
			return
		}
	}
	if initial {
		// The watch-list stream ends its initial state with a bookmark.
		send("BOOKMARK", map[string]any{"apiVersion": res.gv.String(), "kind": res.kind, "metadata": map[string]any{
			"resourceVersion": strconv.FormatUint(rv, 10),
			"annotations":     map[string]any{metav1.InitialEventsAnnotationKey: "true"},
		}})
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case e, ok := <-wt.ch:
			if !ok {
				return
			}
			if !send(e.Type, e.obj) {
				return
			}
			// Send what else is queued before flushing.
			for drained := false; !drained; {
				select {
				case e, ok := <-wt.ch:
					if !ok {
						if flusher != nil {
							flusher.Flush()
						}
						return
					}
					if !send(e.Type, e.obj) {
						return
					}
				default:
					drained = true
				}
			}
			if flusher != nil {
				flusher.Flush()
			}
		case <-timer.C:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func readObject(r *http.Request) (object, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if mediaType(r.Header.Get("Content-Type")) == runtime.ContentTypeProtobuf {
		// client-go sends built-in kinds as protobuf; answers may be JSON,
		// as clients decode by the answer's Content-Type.
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
		if !ok {
			return nil, apierrors.NewBadRequest("protobuf is not supported")
		}
		typed, _, err := info.Serializer.Decode(body, nil, nil)
		if err != nil {
			return nil, apierrors.NewBadRequest("the protobuf body does not decode: " + err.Error())
		}
		o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return copyObject(o), nil
	}
	o := object{}
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	normalise(o)
	return o, nil
}

// stamp sets what the URL decides: kind, apiVersion and namespace.
func stamp(o object, res resource, ns string) {
	o["apiVersion"] = res.gv.String()
	o["kind"] = res.kind
	if res.namespaced {
		metaOf(o)["namespace"] = ns
	}
}

// codecs decode request bodies of Kubernetes' built-in kinds.
var codecs = serializer.NewCodecFactory(clientgoscheme.Scheme)

func mediaType(contentType string) string {
	return strings.TrimSpace(strings.Split(contentType, ";")[0])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(st.Code), st)
}
