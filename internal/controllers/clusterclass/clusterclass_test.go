package clusterclass_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	fx "capstan.dev/capstan/test/fixture"
)

const timeout = 30 * time.Second

// quickStart is the tests' class and its templates in ns, edited by edit
// when set, uncreated.
func quickStart(t *testing.T, ns string, edit func(*clusterv1.ClusterClass)) (*clusterv1.ClusterClass, []*unstructured.Unstructured) {
	t.Helper()
	cc, templates := fx.QuickStartClass(t, ns)
	if edit != nil {
		edit(cc)
	}
	return cc, templates
}

func create(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		fx.Create(t, env.Client, o)
	}
}

// status waits until the class's status describes its generation and
// cond(class) is satisfied.
func waitFor(t *testing.T, cc *clusterv1.ClusterClass, what string, cond func(*clusterv1.ClusterClass) string) *clusterv1.ClusterClass {
	t.Helper()
	got := &clusterv1.ClusterClass{}
	fx.Eventually(t, what, timeout, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), got); err != nil {
			return err.Error()
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Sprintf("status is of generation %d, not %d", got.Status.ObservedGeneration, got.Generation)
		}
		return cond(got)
	})
	return got
}

func condition(cc *clusterv1.ClusterClass, typ string, status metav1.ConditionStatus) string {
	return fx.Condition(cc.Status.Conditions, typ, status)
}

func TestClassOwnsItsTemplatesAndGathersItsVariables(t *testing.T) {
	ns := env.Namespace(t)
	cc, templates := quickStart(t, ns, nil)
	create(t, templates...)
	fx.Create(t, env.Client, cc)

	got := waitFor(t, cc, "class reconciled", func(cc *clusterv1.ClusterClass) string {
		if why := condition(cc, clusterv1.ClusterClassRefVersionsUpToDateCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		if why := condition(cc, clusterv1.ClusterClassVariablesReadyCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		return condition(cc, clusterv1.PausedCondition, metav1.ConditionFalse)
	})
	var names []string
	for _, v := range got.Status.Variables {
		if len(v.Definitions) != 1 || v.Definitions[0].From != "inline" {
			t.Errorf("status variable %s: definitions %+v, want one from inline", v.Name, v.Definitions)
		}
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "imageRepository,kubeletLogLevel,podSecurityStandard" {
		t.Errorf("status.variables = %v, want the class's three variables", names)
	}

	// Every template the class points at (one shared by three worker
	// classes) is owned by the class, not controlled: upstream's shape, so
	// clusterctl move and the garbage collector follow it.
	for _, tmpl := range templates {
		fx.Eventually(t, tmpl.GetKind()+" "+tmpl.GetName()+" owned by the class", timeout, func(ctx context.Context) string {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(tmpl.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), u); err != nil {
				return err.Error()
			}
			for _, ref := range u.GetOwnerReferences() {
				if ref.Kind == clusterv1.ClusterClassKind && ref.Name == cc.Name && ref.UID == got.UID {
					return fx.Unless(ref.Controller == nil || !*ref.Controller, "the class is the template's controller")
				}
			}
			return fmt.Sprintf("owner references %v lack the class", u.GetOwnerReferences())
		})
	}
}

func TestRefBehindItsContractVersionIsNamed(t *testing.T) {
	ns := env.Namespace(t)
	cc, templates := quickStart(t, ns, func(cc *clusterv1.ClusterClass) {
		cc.Spec.Workers.MachineDeployments[1].Infrastructure.TemplateRef.APIVersion = "infrastructure.cluster.x-k8s.io/v1beta1"
	})
	create(t, templates...)
	fx.Create(t, env.Client, cc)
	got := waitFor(t, cc, "RefVersionsUpToDate False", func(cc *clusterv1.ClusterClass) string {
		return condition(cc, clusterv1.ClusterClassRefVersionsUpToDateCondition, metav1.ConditionFalse)
	})
	c := conditions.Get(got, clusterv1.ClusterClassRefVersionsUpToDateCondition)
	want := "* LocalMachineTemplate qs-big-worker (spec.workers.machineDeployments[big-worker].infrastructure.templateRef): v1beta1, current v1beta2"
	if c.Reason != clusterv1.ClusterClassRefVersionsNotUpToDateReason || !strings.Contains(c.Message, want) {
		t.Fatalf("RefVersionsUpToDate: %s %q, want %s naming %q", c.Reason, c.Message, clusterv1.ClusterClassRefVersionsNotUpToDateReason, want)
	}
	if strings.Count(c.Message, "\n* ") != 1 {
		t.Errorf("message names more than the one outdated reference: %q", c.Message)
	}

	// Moving the reference to the current version clears the condition.
	fx.Eventually(t, "reference updated", timeout, func(ctx context.Context) string {
		cur := &clusterv1.ClusterClass{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cur); err != nil {
			return err.Error()
		}
		cur.Spec.Workers.MachineDeployments[1].Infrastructure.TemplateRef.APIVersion = "infrastructure.cluster.x-k8s.io/v1beta2"
		return fx.Reason(env.Client.Update(ctx, cur))
	})
	waitFor(t, cc, "RefVersionsUpToDate True", func(cc *clusterv1.ClusterClass) string {
		return condition(cc, clusterv1.ClusterClassRefVersionsUpToDateCondition, metav1.ConditionTrue)
	})
}

func TestMissingTemplateIsNamedUntilItIsCreated(t *testing.T) {
	ns := env.Namespace(t)
	cc, templates := quickStart(t, ns, nil)
	var missing *unstructured.Unstructured
	for _, tmpl := range templates {
		if tmpl.GetName() == "qs-pool" {
			missing = tmpl
			continue
		}
		create(t, tmpl)
	}
	fx.Create(t, env.Client, cc)
	got := waitFor(t, cc, "RefVersionsUpToDate Unknown", func(cc *clusterv1.ClusterClass) string {
		return condition(cc, clusterv1.ClusterClassRefVersionsUpToDateCondition, metav1.ConditionUnknown)
	})
	c := conditions.Get(got, clusterv1.ClusterClassRefVersionsUpToDateCondition)
	want := "spec.workers.machinePools[default-pool].infrastructure.templateRef: LocalMachinePoolTemplate qs-pool does not exist in namespace " + ns + ": create it or fix the reference"
	if !strings.Contains(c.Message, want) {
		t.Fatalf("RefVersionsUpToDate message %q lacks %q", c.Message, want)
	}
	// The template's creation wakes the class (no waiting for a retry).
	create(t, missing)
	fx.Eventually(t, "RefVersionsUpToDate True soon after the template appears", 10*time.Second, func(ctx context.Context) string {
		cur := &clusterv1.ClusterClass{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cur); err != nil {
			return err.Error()
		}
		return condition(cur, clusterv1.ClusterClassRefVersionsUpToDateCondition, metav1.ConditionTrue)
	})
}

func TestBrokenVariableDefinitionIsNamed(t *testing.T) {
	ns := env.Namespace(t)
	cc, templates := quickStart(t, ns, nil)
	create(t, templates...)
	fx.Create(t, env.Client, cc)
	good := waitFor(t, cc, "variables ready", func(cc *clusterv1.ClusterClass) string {
		return condition(cc, clusterv1.ClusterClassVariablesReadyCondition, metav1.ConditionTrue)
	})

	// A default that its own schema refuses.
	fx.Eventually(t, "definition broken", timeout, func(ctx context.Context) string {
		cur := &clusterv1.ClusterClass{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cur); err != nil {
			return err.Error()
		}
		max := int64(10)
		cur.Spec.Variables[1].Schema.OpenAPIV3Schema.Maximum = &max
		cur.Spec.Variables[1].Schema.OpenAPIV3Schema.Default = jsonValue(`11`)
		return fx.Reason(env.Client.Update(ctx, cur))
	})
	got := waitFor(t, cc, "VariablesReady False", func(cc *clusterv1.ClusterClass) string {
		return condition(cc, clusterv1.ClusterClassVariablesReadyCondition, metav1.ConditionFalse)
	})
	c := conditions.Get(got, clusterv1.ClusterClassVariablesReadyCondition)
	if !strings.Contains(c.Message, "spec.variables[1]") {
		t.Errorf("VariablesReady message %q does not name spec.variables[1]", c.Message)
	}
	// Clusters keep being checked against the last valid definitions.
	if len(got.Status.Variables) != len(good.Status.Variables) {
		t.Errorf("status.variables changed with a broken definition: %d entries, had %d", len(got.Status.Variables), len(good.Status.Variables))
	}
}

func TestPausedClassIsLeftAlone(t *testing.T) {
	ns := env.Namespace(t)
	cc, templates := quickStart(t, ns, func(cc *clusterv1.ClusterClass) {
		cc.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	create(t, templates...)
	fx.Create(t, env.Client, cc)
	got := &clusterv1.ClusterClass{}
	fx.Eventually(t, "Paused True", timeout, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), got); err != nil {
			return err.Error()
		}
		return condition(got, clusterv1.PausedCondition, metav1.ConditionTrue)
	})
	if len(got.Status.Variables) != 0 || conditions.Get(got, clusterv1.ClusterClassVariablesReadyCondition) != nil {
		t.Errorf("a paused class was reconciled: %+v", got.Status)
	}
	u := templates[0].DeepCopy()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	if len(u.GetOwnerReferences()) != 0 {
		t.Errorf("a paused class took its templates: %v", u.GetOwnerReferences())
	}
}

func jsonValue(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
