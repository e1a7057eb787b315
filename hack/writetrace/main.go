// Command writetrace prints every create, delete and update of Cluster API
// objects, Secrets, ConfigMaps and Events in namespaces with a given prefix,
// and for an update the fields it changed: the diagnostic behind the write
// counts of `capstan bench scale`, for finding writes a controller could
// have saved. Run it against a plane started with
// `capstan up --foreground --controllers=false`, and the bench with
// --kubeconfig pointing at the same plane:
//
//	go run ./hack/writetrace --kubeconfig K > trace.txt &
//	capstan bench scale --kubeconfig K --clusters 10 --delays 0
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the management cluster's kubeconfig")
	prefix := flag.String("namespace-prefix", "bench", "trace only namespaces whose name starts with this")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		panic(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	dc := dynamic.NewForConfigOrDie(cfg)
	f := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	gvrs := []schema.GroupVersionResource{
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinesets"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"},
		{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmcontrolplanes"},
		{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmconfigs"},
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Resource: "inmemorymachines"},
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Resource: "inmemoryclusters"},
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Resource: "inmemorymachinetemplates"},
		{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmconfigtemplates"},
		{Group: "", Version: "v1", Resource: "events"},
		{Group: "", Version: "v1", Resource: "secrets"},
		{Group: "", Version: "v1", Resource: "configmaps"},
	}
	var mu sync.Mutex
	start := time.Now()
	out := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, "%7.3f ", time.Since(start).Seconds())
		fmt.Fprintf(os.Stdout, format+"\n", a...)
	}
	for _, gvr := range gvrs {
		res := gvr.Resource
		f.ForResource(gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				u := o.(*unstructured.Unstructured)
				if !strings.HasPrefix(u.GetNamespace(), *prefix) {
					return
				}
				extra := ""
				if res == "events" {
					r, _, _ := unstructured.NestedString(u.Object, "reason")
					m, _, _ := unstructured.NestedString(u.Object, "message")
					k, _, _ := unstructured.NestedString(u.Object, "involvedObject", "kind")
					extra = k + " " + r + ": " + m
				}
				out("ADD %s %s %s", res, u.GetName(), extra)
			},
			UpdateFunc: func(o, n any) {
				ou, nu := o.(*unstructured.Unstructured), n.(*unstructured.Unstructured)
				if !strings.HasPrefix(nu.GetNamespace(), *prefix) {
					return
				}
				if ou.GetResourceVersion() == nu.GetResourceVersion() {
					return
				}
				var paths []string
				diff("", clean(ou.Object), clean(nu.Object), &paths)
				sort.Strings(paths)
				out("UPD %s %s %s", res, nu.GetName(), strings.Join(paths, " | "))
			},
			DeleteFunc: func(o any) {
				if u, ok := o.(*unstructured.Unstructured); ok && strings.HasPrefix(u.GetNamespace(), *prefix) {
					out("DEL %s %s", res, u.GetName())
				}
			},
		})
	}
	ctx := context.Background()
	f.Start(ctx.Done())
	<-ctx.Done()
}

func clean(o map[string]any) map[string]any {
	c := unstructured.Unstructured{Object: o}
	c = *c.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	return c.Object
}

func short(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

func diff(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			diff(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			// A condition is named by its type, not its index.
			p := fmt.Sprintf("%s[%d]", path, i)
			if m, ok := bl[i].(map[string]any); ok {
				if t, ok := m["type"].(string); ok {
					p = path + "[" + t + "]"
				}
			}
			diff(p, al[i], bl[i], out)
		}
		return
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		*out = append(*out, path+"="+short(b))
	}
}
