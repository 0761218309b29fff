package cpu

// ActivationsQuantized is exported to the external tests.
var ActivationsQuantized = activationsQuantized
