// The test programs call Native and read the Interop structs directly (ExecuteTests compares
// sizes and offsets with the C header's), and both read JSON with the binding's own reader (Json).
using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("ApiTests")]
[assembly: InternalsVisibleTo("Conformance")]
