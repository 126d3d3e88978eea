package privacy

// LockSubjects exposes the erasure's subject lock, so that a test can hold an erasure in flight.
var LockSubjects = lockSubjects
