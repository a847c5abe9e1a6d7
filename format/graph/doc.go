// Package graph is the vocabulary of a forward step: ops over named
// activation tensors, and the arena plan that places the tensors. Package
// arch builds each architecture's step from these ops; the compiler plans
// its arena and the runtime executes it, both from the same list, so the
// compiled plan and the execution cannot drift apart: the runtime rebuilds
// the list from the config and checks every tensor against the file's
// plan.
package graph
