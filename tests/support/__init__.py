"""What tests import: fakes, servers, paths and waiting helpers. Conftests hold fixtures only."""
