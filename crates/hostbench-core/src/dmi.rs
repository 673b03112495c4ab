//! DRAM DIMMs from the SMBIOS table (type 17), for the theoretical memory bandwidth.
