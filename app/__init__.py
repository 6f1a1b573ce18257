"""The collviz command line and Textual viewer: consumers of the runtime's event stream."""
