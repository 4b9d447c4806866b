-- qcn.lua: Wireshark/tshark dissectors for IEEE 802.1Q Congestion Notification (formerly
-- 802.1Qau, clauses 30-33) and the project's experimental explicit-rate feedback message.
--
--   EtherType 0x22E9  CN-TAG: Flow ID / RPID (2 octets), then the next EtherType.
--   EtherType 0x22E7  Congestion Notification Message (CNM), a 24..88 octet PDU:
--                       Version(4 bits) Reserved(6 bits) QntzFb(6 bits)
--                       CPID(8) cnmQOffset(2, signed) cnmQDelta(2, signed)
--                       Encapsulated priority(2) Encapsulated DA(6)
--                       Encapsulated MSDU length(2) Encapsulated MSDU(0..64)
--   EtherType 0x88B5  Rate feedback (non-standard, experimental; 0x88B5 is the IEEE 802
--                     "local experimental" EtherType 1), 26 octets:
--                       version(1) reserved(1) encapsulated priority(2) CPID(8)
--                       advertised rate(8, bit/s) encapsulated DA(6)
--
-- Conventions the standard leaves open, shared with the project's emitter and parser:
--   * CPID = 6-octet MAC of the switch + 2-octet index (port * 8 + priority); the top bit of
--     the index is set for a congestion point on an input port.
--   * cnmQOffset and cnmQDelta are in units of 64 octets, saturating.
--   * The encapsulated priority is carried in the 3 most significant bits of its 2-octet field.
--   * The encapsulated MSDU starts at the EtherType that follows the sampled frame's VLAN tag
--     (so a CN-TAG, if any, is included).
--
-- Wireshark 4.0 already decodes 802.3x PAUSE / 802.1Qbb PFC (macc.*) and the LLDP
-- Congestion Notification TLV; it has no dissector for 0x22E9 or 0x22E7.
--
-- Use: tshark -X lua_script:qcn.lua -r capture.pcap
--  or: copy into the personal Lua plugin folder (scripts/install-wireshark-dissector.sh).

local ETH_CNTAG = 0x22E9
local ETH_CNM = 0x22E7
local ETH_RATEFB = 0x88B5

local CNM_HEADER_LEN = 24 -- octets before the encapsulated MSDU
local CNM_MAX_MSDU = 64 -- IEEE 802.1Q: at most 64 octets of the sampled frame
local RATEFB_LEN = 26
local QUEUE_UNIT = 64 -- octets per unit of cnmQOffset / cnmQDelta (project convention)
local CPID_INPUT_FLAG = 0x8000

local ethertype_table = DissectorTable.get("ethertype")

-- ---------------------------------------------------------------------------------------
-- CN-TAG
-- ---------------------------------------------------------------------------------------
-- Loaded twice (installed as a personal plugin and also given with -X lua_script:)? Protocols
-- cannot be registered twice, so the first copy stays in charge and this one steps aside.
local loaded, cntag = pcall(Proto, "cntag", "IEEE 802.1Q Congestion Notification Tag (CN-TAG)")
if not loaded then
    return
end
local f_cntag_rpid = ProtoField.uint16("cntag.rpid", "Flow ID (RPID)", base.HEX,
    nil, nil, "Reaction point identifier; 0 = no flow id")
local f_cntag_etype = ProtoField.uint16("cntag.ethertype", "Type", base.HEX)
cntag.fields = { f_cntag_rpid, f_cntag_etype }

local ef_cntag_short = ProtoExpert.new("cntag.malformed", "Malformed CN-TAG",
    expert.group.MALFORMED, expert.severity.ERROR)
cntag.experts = { ef_cntag_short }

function cntag.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    pinfo.cols.protocol:set("CN-TAG")
    local ti = tree:add(cntag, tvb(0, math.min(len, 4)))
    if len < 4 then
        ti:add_proto_expert_info(ef_cntag_short,
            string.format("CN-TAG truncated: %d octets, need 4", len))
        pinfo.cols.info:set(string.format("CN-TAG [malformed: %d octets]", len))
        return len
    end
    local rpid = tvb(0, 2):uint()
    local etype = tvb(2, 2):uint()
    local rpid_item = ti:add(f_cntag_rpid, tvb(0, 2))
    if rpid == 0 then
        rpid_item:append_text(" (no flow id)")
    end
    ti:add(f_cntag_etype, tvb(2, 2))
    ti:append_text(string.format(", RPID: 0x%04x", rpid))
    pinfo.cols.info:set(string.format("CN-TAG RPID=0x%04x", rpid))

    local rest = tvb:range(4)
    if len > 4 then
        -- Hand the rest of the frame to the next EtherType's dissector (the data dissector
        -- if none is registered). A sub-dissector failure must not become a Lua error.
        pcall(function() ethertype_table:try(etype, rest:tvb(), pinfo, tree) end)
    end
    -- Keep the RPID visible whatever the payload's dissector wrote.
    local info = tostring(pinfo.cols.info)
    if not string.find(info, "RPID=", 1, true) then
        pinfo.cols.info:prepend(string.format("[RPID=0x%04x] ", rpid))
    end
    return len
end

-- ---------------------------------------------------------------------------------------
-- CNM
-- ---------------------------------------------------------------------------------------
local cnm = Proto("cnm", "IEEE 802.1Q Congestion Notification Message (CNM)")

local f_version = ProtoField.uint16("cnm.version", "Version", base.DEC, nil, 0xF000)
local f_reserved = ProtoField.uint16("cnm.reserved", "Reserved", base.HEX, nil, 0x0FC0)
local f_qntzfb = ProtoField.uint16("cnm.qntzfb", "QntzFb", base.DEC, nil, 0x003F,
    "Quantized congestion feedback |Fb|, 1..63")
local f_cpid = ProtoField.uint64("cnm.cpid", "Congestion Point ID (CPID)", base.HEX)
local f_cpid_mac = ProtoField.ether("cnm.cpid.mac", "CP MAC address")
local f_cpid_index = ProtoField.uint16("cnm.cpid.index", "CP index", base.HEX)
local f_cpid_input = ProtoField.bool("cnm.cpid.input", "Input congestion point", 16,
    nil, CPID_INPUT_FLAG)
local f_cpid_port = ProtoField.uint16("cnm.cpid.port", "Port", base.DEC)
local f_cpid_prio = ProtoField.uint16("cnm.cpid.priority", "Priority", base.DEC, nil, 0x0007)
local f_qoffset = ProtoField.int16("cnm.qoffset", "cnmQOffset", base.DEC, nil, nil,
    "Qoff = Q - Qeq, in units of 64 octets")
local f_qdelta = ProtoField.int16("cnm.qdelta", "cnmQDelta", base.DEC, nil, nil,
    "Qdelta = Q - Qold, in units of 64 octets")
local f_encap_prio = ProtoField.uint16("cnm.encap_priority", "Encapsulated priority",
    base.DEC, nil, 0xE000, "Priority of the sampled frame (3 most significant bits)")
local f_encap_prio_raw = ProtoField.uint16("cnm.encap_priority_raw",
    "Encapsulated priority field", base.HEX)
local f_encap_da = ProtoField.ether("cnm.encap_da", "Encapsulated destination address")
local f_msdu_len = ProtoField.uint16("cnm.encap_msdu_len", "Encapsulated MSDU length", base.DEC)
local f_msdu = ProtoField.bytes("cnm.encap_msdu", "Encapsulated MSDU")
local f_msdu_etype = ProtoField.uint16("cnm.encap_msdu_ethertype", "Encapsulated EtherType",
    base.HEX)
local f_padding = ProtoField.bytes("cnm.padding", "Padding")

cnm.fields = {
    f_version, f_reserved, f_qntzfb, f_cpid, f_cpid_mac, f_cpid_index, f_cpid_input,
    f_cpid_port, f_cpid_prio, f_qoffset, f_qdelta, f_encap_prio, f_encap_prio_raw,
    f_encap_da, f_msdu_len, f_msdu, f_msdu_etype, f_padding,
}

local ef_malformed = ProtoExpert.new("cnm.malformed", "Malformed CNM",
    expert.group.MALFORMED, expert.severity.ERROR)
local ef_version = ProtoExpert.new("cnm.version.unknown", "Unknown CNM version",
    expert.group.PROTOCOL, expert.severity.WARN)
local ef_qntzfb_zero = ProtoExpert.new("cnm.qntzfb.zero", "QntzFb is 0 (no congestion fed back)",
    expert.group.PROTOCOL, expert.severity.NOTE)
cnm.experts = { ef_malformed, ef_version, ef_qntzfb_zero }

cnm.prefs.dissect_msdu = Pref.bool("Dissect the encapsulated MSDU", true,
    "Decode the encapsulated MSDU through the EtherType table when its EtherType is known")

-- MAC address as aa:bb:cc:dd:ee:ff, without name resolution (stable in the Info column).
local function mac_string(range)
    local parts = {}
    for i = 0, 5 do
        parts[#parts + 1] = string.format("%02x", range(i, 1):uint())
    end
    return table.concat(parts, ":")
end

local function cpid_string(mac_range, index)
    return string.format("%s/%04x", mac_string(mac_range), index)
end

function cnm.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    pinfo.cols.protocol:set("CNM")
    local ti = tree:add(cnm, tvb())

    if len < CNM_HEADER_LEN then
        ti:add_proto_expert_info(ef_malformed,
            string.format("CNM PDU too short: %d octets, at least %d required", len,
                CNM_HEADER_LEN))
        pinfo.cols.info:set(string.format("CNM [malformed: PDU %d octets < %d]", len,
            CNM_HEADER_LEN))
        return len
    end

    local word0 = tvb(0, 2):uint()
    local version = bit.rshift(bit.band(word0, 0xF000), 12)
    local qntzfb = bit.band(word0, 0x003F)
    ti:add(f_version, tvb(0, 2))
    if version ~= 0 then
        ti:add_proto_expert_info(ef_version, string.format("CNM version %d (expected 0)", version))
    end
    ti:add(f_reserved, tvb(0, 2))
    ti:add(f_qntzfb, tvb(0, 2))
    if qntzfb == 0 then
        ti:add_proto_expert_info(ef_qntzfb_zero)
    end

    local index = tvb(8, 2):uint()
    local cpid_item = ti:add(f_cpid, tvb(2, 8))
    cpid_item:append_text(string.format(" (%s%s)", cpid_string(tvb(2, 6), index),
        bit.band(index, CPID_INPUT_FLAG) ~= 0 and ", input CP" or ""))
    cpid_item:add(f_cpid_mac, tvb(2, 6))
    local index_item = cpid_item:add(f_cpid_index, tvb(8, 2))
    index_item:append_text(" (port * 8 + priority, project convention)")
    cpid_item:add(f_cpid_input, tvb(8, 2))
    cpid_item:add(f_cpid_port, tvb(8, 2), bit.rshift(bit.band(index, 0x7FFF), 3))
    cpid_item:add(f_cpid_prio, tvb(8, 2))

    local qoff = tvb(10, 2):int()
    local qdelta = tvb(12, 2):int()
    ti:add(f_qoffset, tvb(10, 2)):append_text(string.format(" (%d octets)", qoff * QUEUE_UNIT))
    ti:add(f_qdelta, tvb(12, 2)):append_text(string.format(" (%d octets)", qdelta * QUEUE_UNIT))

    local eprio = bit.rshift(tvb(14, 2):uint(), 13)
    ti:add(f_encap_prio, tvb(14, 2))
    ti:add(f_encap_prio_raw, tvb(14, 2))
    ti:add(f_encap_da, tvb(16, 6))
    local msdu_len = tvb(22, 2):uint()
    local len_item = ti:add(f_msdu_len, tvb(22, 2))

    local present = len - CNM_HEADER_LEN
    local info = string.format("CNM QntzFb=%d CPID=%s%s Qoff=%d Qdelta=%d Prio=%d DA=%s",
        qntzfb, cpid_string(tvb(2, 6), index),
        bit.band(index, CPID_INPUT_FLAG) ~= 0 and "(in)" or "", qoff, qdelta, eprio,
        mac_string(tvb(16, 6)))

    ti:append_text(string.format(", QntzFb: %d, CPID: %s, Qoff: %d, Qdelta: %d", qntzfb,
        cpid_string(tvb(2, 6), index), qoff, qdelta))

    local bad = nil
    if msdu_len > CNM_MAX_MSDU then
        bad = string.format("Encapsulated MSDU length %d exceeds %d", msdu_len, CNM_MAX_MSDU)
    elseif msdu_len > present then
        bad = string.format("Encapsulated MSDU length %d exceeds the %d octets present",
            msdu_len, present)
    end
    if bad then
        len_item:add_proto_expert_info(ef_malformed, bad)
        if present > 0 then
            ti:add(f_msdu, tvb(CNM_HEADER_LEN, math.min(present, CNM_MAX_MSDU)))
        end
        pinfo.cols.info:set(info .. " [malformed: " .. bad .. "]")
        return len
    end

    ti:set_len(CNM_HEADER_LEN + msdu_len)
    if msdu_len > 0 then
        local msdu_range = tvb(CNM_HEADER_LEN, msdu_len)
        local msdu_item = ti:add(f_msdu, msdu_range)
        msdu_item:append_text(string.format(" (first %d octets of the sampled frame's MSDU)",
            msdu_len))
        if msdu_len >= 2 then
            local etype = msdu_range(0, 2):uint()
            msdu_item:add(f_msdu_etype, msdu_range(0, 2))
            if msdu_len > 2 and cnm.prefs.dissect_msdu
                and ethertype_table:get_dissector(etype) ~= nil then
                -- The sampled frame is cut at 64 octets, so its own dissectors may run off the
                -- end or flag lengths that exceed what is present (those notes belong to the
                -- copy, not to the CNM); neither that nor what they write to the columns and
                -- addresses may hide the CNM. The "Dissect the encapsulated MSDU" preference
                -- turns this off.
                local proto_col = tostring(pinfo.cols.protocol)
                local saved = { pinfo.src, pinfo.dst, pinfo.net_src, pinfo.net_dst }
                pcall(function()
                    ethertype_table:try(etype, msdu_range:range(2):tvb(), pinfo, msdu_item)
                end)
                pinfo.src, pinfo.dst, pinfo.net_src, pinfo.net_dst =
                    saved[1], saved[2], saved[3], saved[4]
                pinfo.cols.protocol:clear_fence()
                pinfo.cols.info:clear_fence()
                pinfo.cols.protocol:set(proto_col)
            end
        end
    end
    if len > CNM_HEADER_LEN + msdu_len then
        ti:add(f_padding, tvb(CNM_HEADER_LEN + msdu_len))
    end
    pinfo.cols.info:set(info)
    return len
end

-- ---------------------------------------------------------------------------------------
-- Rate feedback (non-standard, experimental)
-- ---------------------------------------------------------------------------------------
local ratefb = Proto("ratefb", "QCN explicit-rate feedback (non-standard, experimental)")
local f_rf_version = ProtoField.uint8("ratefb.version", "Version", base.DEC)
local f_rf_reserved = ProtoField.uint8("ratefb.reserved", "Reserved", base.HEX)
local f_rf_prio = ProtoField.uint16("ratefb.encap_priority", "Encapsulated priority", base.DEC,
    nil, 0xE000)
local f_rf_cpid = ProtoField.uint64("ratefb.cpid", "Congestion Point ID (CPID)", base.HEX)
local f_rf_rate = ProtoField.uint64("ratefb.rate", "Advertised rate (bit/s)", base.DEC)
local f_rf_da = ProtoField.ether("ratefb.encap_da", "Encapsulated destination address")
local f_rf_padding = ProtoField.bytes("ratefb.padding", "Padding")
ratefb.fields = { f_rf_version, f_rf_reserved, f_rf_prio, f_rf_cpid, f_rf_rate, f_rf_da,
    f_rf_padding }

local ef_rf_malformed = ProtoExpert.new("ratefb.malformed", "Malformed rate feedback",
    expert.group.MALFORMED, expert.severity.ERROR)
local ef_rf_experimental = ProtoExpert.new("ratefb.experimental",
    "Non-standard experimental message (IEEE 802 local experimental EtherType)",
    expert.group.PROTOCOL, expert.severity.NOTE)
ratefb.experts = { ef_rf_malformed, ef_rf_experimental }

local function rate_string(bps)
    -- bps is a UInt64; format through its decimal string to stay exact.
    local n = tonumber(tostring(bps)) or 0
    if n >= 1e9 then
        return string.format("%.3f Gbit/s", n / 1e9)
    elseif n >= 1e6 then
        return string.format("%.3f Mbit/s", n / 1e6)
    elseif n >= 1e3 then
        return string.format("%.3f kbit/s", n / 1e3)
    end
    return string.format("%d bit/s", n)
end

function ratefb.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    pinfo.cols.protocol:set("RATE-FB")
    local ti = tree:add(ratefb, tvb())
    ti:add_proto_expert_info(ef_rf_experimental)
    if len < RATEFB_LEN then
        ti:add_proto_expert_info(ef_rf_malformed,
            string.format("Rate feedback too short: %d octets, %d required", len, RATEFB_LEN))
        pinfo.cols.info:set(string.format("Rate feedback [malformed: %d octets < %d]", len,
            RATEFB_LEN))
        return len
    end
    ti:set_len(RATEFB_LEN)
    ti:add(f_rf_version, tvb(0, 1))
    ti:add(f_rf_reserved, tvb(1, 1))
    ti:add(f_rf_prio, tvb(2, 2))
    local index = tvb(10, 2):uint()
    ti:add(f_rf_cpid, tvb(4, 8)):append_text(string.format(" (%s)", cpid_string(tvb(4, 6), index)))
    local rate = tvb(12, 8):uint64()
    ti:add(f_rf_rate, tvb(12, 8)):append_text(" (" .. rate_string(rate) .. ")")
    ti:add(f_rf_da, tvb(20, 6))
    if len > RATEFB_LEN then
        ti:add(f_rf_padding, tvb(RATEFB_LEN))
    end
    pinfo.cols.info:set(string.format("Rate feedback (experimental) CPID=%s Rate=%s Prio=%d DA=%s",
        cpid_string(tvb(4, 6), index), rate_string(rate), bit.rshift(tvb(2, 2):uint(), 13),
        mac_string(tvb(20, 6))))
    return len
end

ethertype_table:add(ETH_CNTAG, cntag)
ethertype_table:add(ETH_CNM, cnm)
ethertype_table:add(ETH_RATEFB, ratefb)
